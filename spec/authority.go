package spec

// AuthorityProtocolVersion is the version field of every authority request.
const AuthorityProtocolVersion = 1

// AuthorityMaxResponse is the most the relay reads from an adapter's stdout.
const AuthorityMaxResponse = 64 << 10

// AuthorityRequest is the one JSON object the relay writes, followed by a
// newline, to the authority adapter's stdin (docs/authority.md describes
// the whole exchange).
type AuthorityRequest struct {
	Version     int    `json:"version"`
	RequestID   string `json:"request_id"`
	TaskID      string `json:"task_id"`
	MissionID   string `json:"mission_id"`
	LeaseID     string `json:"lease_id"`
	Caller      string `json:"caller"`
	Target      string `json:"target"`
	Mode        string `json:"mode"`
	RequestedAt string `json:"requested_at"` // RFC 3339
	// ParentTaskID is the task inside which this one was submitted, ""
	// for a top-level task; Chain the hops from the top-level task down to
	// that parent, oldest first (empty for a top-level task), and Depth
	// the task's own depth, len(Chain)+1. Always present.
	ParentTaskID string         `json:"parent_task_id"`
	Chain        []AuthorityHop `json:"chain"`
	Depth        int            `json:"depth"`
}

// AuthorityHop is one delegation of an authority request's chain: a task,
// its caller and its target.
type AuthorityHop struct {
	TaskID string `json:"task_id"`
	Caller string `json:"caller"`
	Target string `json:"target"`
}

// AuthorityResponse is the one JSON object the adapter writes to stdout.
// Decision is "allow" or "deny"; Assurance is "guarded" or "standard"
// (absent means standard); Code and Message explain a deny.
type AuthorityResponse struct {
	Decision  string `json:"decision"`
	Assurance string `json:"assurance,omitempty"`
	Code      string `json:"code,omitempty"`
	Message   string `json:"message,omitempty"`
}

// Authority decisions.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
)

package dispatch_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/dispatch/dispatchtest"
	"github.com/hai-relay/relay/dispatch/hardening"
)

// A probe's worked_live belongs to the adapter it ran on: once another
// is installed (another version, other files) it is shown stale, not
// carried over; and a probe that failed because the sandbox could not
// run is not shown as current once the sandbox can.
func TestProbeBelongsToItsAdapter(t *testing.T) {
	t.Parallel()
	entry, err := dispatchtest.InstallAdapter(t.TempDir(), dispatchtest.BuildFakeAgent(t), "claude")
	if err != nil {
		t.Fatal(err)
	}
	reg := dispatch.NewRegistry([]dispatch.AgentSpec{{Name: "claude", Command: []string{entry}, Enabled: true,
		Profiles: hardening.ProfilesFor("claude")}}, nil, nil)
	ctx := context.Background()
	before, _ := reg.Agent(ctx, "claude")
	if before.Adapter.Fingerprint == "" {
		t.Fatalf("no fingerprint for %s: %+v", entry, before.Adapter)
	}
	reg.SetProbe("claude", dispatch.Probe{OK: true, At: time.Now(), Reason: "end_turn in 1s", Fingerprint: before.Adapter.Fingerprint})
	if a, _ := reg.Agent(ctx, "claude"); !a.WorkedLive {
		t.Fatalf("probed on the installed adapter: worked_live %v (%s)", a.WorkedLive, a.WorkedLiveReason)
	}
	// Another version of the same package installed over it.
	pj := filepath.Join(filepath.Dir(filepath.Dir(entry)), "package.json")
	var pkg map[string]string
	b, err := os.ReadFile(pj)
	if err != nil || json.Unmarshal(b, &pkg) != nil {
		t.Fatalf("package.json %s: %v", pj, err)
	}
	pkg["version"] += "-next"
	b, _ = json.Marshal(pkg)
	if err := os.WriteFile(pj, b, 0o644); err != nil {
		t.Fatal(err)
	}
	after, _ := reg.Agent(ctx, "claude")
	if after.WorkedLive || !strings.Contains(after.WorkedLiveReason, "stale: the last probe ran on another adapter") ||
		!strings.Contains(after.WorkedLiveReason, "relay agents probe claude") {
		t.Errorf("after the adapter changed: worked_live %v (%s), want stale", after.WorkedLive, after.WorkedLiveReason)
	}

	// A failure whose cause is gone is not shown as current.
	reg.SetProbe("claude", dispatch.Probe{OK: false, At: time.Now(), Fingerprint: after.Adapter.Fingerprint,
		Reason: "spawn: sandboxing the agent: the sandbox cannot run: bubblewrap (bwrap) is not installed"})
	if a, _ := reg.Agent(ctx, "claude"); a.WorkedLive || !strings.Contains(a.WorkedLiveReason, "stale: the last probe failed because the sandbox could not run") {
		t.Errorf("a sandbox failure, the sandbox running now: %v (%s)", a.WorkedLive, a.WorkedLiveReason)
	}
}

package hardening

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// supersededPackages are adapter packages that their maintainers froze or
// archived, with the package that replaces them.
var supersededPackages = map[string]string{
	"@zed-industries/claude-code-acp":  "@agentclientprotocol/claude-agent-acp (this package is the adapter's first name, last version 0.16.2)",
	"@zed-industries/claude-agent-acp": "@agentclientprotocol/claude-agent-acp (this package is frozen at 0.23.1; the new one needs Node 22)",
	"@zed-industries/codex-acp":        "@agentclientprotocol/codex-acp (this package's repository is archived; the new one runs over the Codex App Server)",
}

// Superseded returns the package that replaces the adapter package pkg,
// when its maintainers froze or archived it.
func Superseded(pkg string) (string, bool) {
	r, ok := supersededPackages[pkg]
	return r, ok
}

// VersionRange is a half-open range of adapter versions: From ≤ v <
// Below; an empty Below has no upper bound. It is checked as the semver
// constraint ">= From, < Below" (Masterminds/semver), which parses what
// adapters report (a "v" prefix, one to three parts, Cursor's dates with
// leading zeros such as 2025.08.25) instead of a hand-written parser.
type VersionRange struct {
	From, Below string
}

// Contains reports whether v is in the range. A version that semver
// cannot read is in no range. A pre-release or build suffix is ignored,
// unlike semver's own rule: 0.23.2-rc.1 is in 0.23.x, and 0.24.0-beta is
// not (semver would order it below 0.24.0, but it is a pre-release of the
// next generation, which no profile was verified on); Cursor's versions
// (2025.08.25-896bbe1) carry a commit as their suffix.
func (r VersionRange) Contains(v string) bool {
	ver, err := semver.NewVersion(strings.TrimSpace(v))
	if err != nil {
		return false
	}
	release := semver.New(ver.Major(), ver.Minor(), ver.Patch(), "", "")
	var bounds []string
	if r.From != "" {
		bounds = append(bounds, ">= "+r.From)
	}
	if r.Below != "" {
		bounds = append(bounds, "< "+r.Below)
	}
	if len(bounds) == 0 {
		return true
	}
	c, err := semver.NewConstraint(strings.Join(bounds, ", "))
	return err == nil && c.Check(release)
}

// String writes the range as users read it: "0.23.x", "2.x", ">= 0.61.0".
func (r VersionRange) String() string {
	from, errF := semver.NewVersion(r.From)
	below, errB := semver.NewVersion(r.Below)
	switch {
	case errB != nil:
		return ">= " + r.From
	case errF != nil:
	case from.Major() == 0 && below.Major() == 0 && below.Minor() == from.Minor()+1:
		return fmt.Sprintf("0.%d.x", from.Minor())
	case below.Major() == from.Major()+1 && from.Minor() == 0 && from.Patch() == 0 && below.Minor() == 0 && below.Patch() == 0:
		return fmt.Sprintf("%d.x", from.Major())
	}
	return ">= " + r.From + ", < " + r.Below
}

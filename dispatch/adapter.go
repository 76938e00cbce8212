package dispatch

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/Masterminds/semver/v3"

	"github.com/hai-relay/relay/model"
)

// What runs as an agent is identified twice: before it starts, from the
// files its command resolves to (the npm package.json above the real path
// of the executable, and a fingerprint of that file and the package.json),
// and at initialize, from the agentInfo it reports. The first decides how
// the agent is launched (a profile's environment and arguments), the
// second must agree with it; a verification records the fingerprint, so
// that require_verified holds only for the very files that were verified,
// whatever version string they report.

// Adapter is what the relay found on disk for an agent's command.
type Adapter struct {
	// Path is the command as resolved on the daemon's PATH; RealPath the
	// file its symbolic links lead to. Both "" when it is not found.
	Path     string
	RealPath string
	// Package and Version come from the nearest package.json above
	// RealPath that names a version (an npm install); PackageJSON is its
	// path. All "" when there is none.
	Package     string
	Version     string
	PackageJSON string
	// Fingerprint is the hex SHA-256 over RealPath's path and content and
	// the package.json's path and content ("" when the command is not
	// found or cannot be read).
	Fingerprint string
	// Interpreter is the interpreter the command names when its adapter
	// is a script (node, bun, deno, python: IdentifyCommand); Path and
	// RealPath are then the script's. "" for an executable adapter.
	Interpreter string
	// Err says why the files could not be read, when they could not.
	Err string
}

// fingerprintCache keeps fingerprints by file identity, so that listing the
// agents does not rehash an adapter (a native binary can be 100 MB) that has
// not changed.
var fingerprintCache sync.Map // fileKey → string

type fileKey struct {
	path       string
	dev, ino   uint64
	size       int64
	mtimeNanos int64
	pkgKey     string
}

// IdentifyAdapter identifies the adapter at path, the agent's command as
// resolved on the daemon's PATH ("" when it is not found).
func IdentifyAdapter(path string) Adapter {
	a := Adapter{Path: path}
	if path == "" {
		return a
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		a.Err = err.Error()
		return a
	}
	a.RealPath = real
	pkg := findPackage(real)
	a.Package, a.Version, a.PackageJSON = pkg.name, pkg.version, pkg.path
	fp, err := fingerprint(real, pkg.path)
	if err != nil {
		a.Err = err.Error()
		return a
	}
	a.Fingerprint = fp
	return a
}

// Model is the adapter as relay agents and list_agents show it.
func (a Adapter) Model() model.AgentAdapter {
	out := model.AgentAdapter{Path: a.RealPath, Package: a.Package, Version: a.Version, Fingerprint: a.Fingerprint}
	if out.Path == "" {
		out.Path = a.Path
	}
	if r, ok := supersededPackages[a.Package]; ok {
		out.Superseded = r
	}
	return out
}

// Describe names the adapter in a message: "PACKAGE VERSION" from its
// package.json, else its path.
func (a Adapter) Describe() string {
	switch {
	case a.Package != "":
		return strings.TrimSpace(a.Package + " " + a.Version)
	case a.RealPath != "":
		return a.RealPath + " (no package.json above it)"
	case a.Path != "":
		return a.Path
	}
	return "an adapter that is not installed"
}

// fingerprint hashes the entry file and the package.json, each with its
// path, caching by the files' identity.
func fingerprint(entry, pkgJSON string) (string, error) {
	st, err := os.Stat(entry)
	if err != nil {
		return "", err
	}
	key := fileKey{path: entry, size: st.Size(), mtimeNanos: st.ModTime().UnixNano()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		key.dev, key.ino = uint64(sys.Dev), sys.Ino
	}
	if pkgJSON != "" {
		pst, err := os.Stat(pkgJSON)
		if err != nil {
			return "", err
		}
		key.pkgKey = fmt.Sprintf("%s:%d:%d", pkgJSON, pst.Size(), pst.ModTime().UnixNano())
	}
	if v, ok := fingerprintCache.Load(key); ok {
		return v.(string), nil
	}
	h := sha256.New()
	for _, f := range []string{entry, pkgJSON} {
		if f == "" {
			continue
		}
		fmt.Fprintf(h, "%s\x00", f)
		fh, err := os.Open(f)
		if err != nil {
			return "", err
		}
		_, err = io.Copy(h, fh)
		fh.Close()
		if err != nil {
			return "", err
		}
		h.Write([]byte{0})
	}
	fp := hex.EncodeToString(h.Sum(nil))
	fingerprintCache.Store(key, fp)
	return fp, nil
}

type packageInfo struct {
	name, version, path string
}

// findPackage walks up from file to the nearest package.json that has a
// version, stopping at a node_modules directory.
func findPackage(file string) packageInfo {
	for dir := filepath.Dir(file); ; dir = filepath.Dir(dir) {
		if filepath.Base(dir) == "node_modules" || dir == filepath.Dir(dir) {
			return packageInfo{}
		}
		p := filepath.Join(dir, "package.json")
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var pkg struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		}
		if json.Unmarshal(b, &pkg) == nil && pkg.Version != "" {
			return packageInfo{pkg.Name, pkg.Version, p}
		}
	}
}

// supersededPackages are adapter packages that their maintainers froze or
// archived, with the package that replaces them.
var supersededPackages = map[string]string{
	"@zed-industries/claude-code-acp":  "@agentclientprotocol/claude-agent-acp (this package is the adapter's first name, last version 0.16.2)",
	"@zed-industries/claude-agent-acp": "@agentclientprotocol/claude-agent-acp (this package is frozen at 0.23.1; the new one needs Node 22)",
	"@zed-industries/codex-acp":        "@agentclientprotocol/codex-acp (this package's repository is archived; the new one runs over the Codex App Server)",
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

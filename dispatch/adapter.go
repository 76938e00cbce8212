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

	"github.com/hai-relay/relay/dispatch/hardening"
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
	if r, ok := hardening.Superseded(a.Package); ok {
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

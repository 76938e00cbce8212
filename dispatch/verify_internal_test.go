package dispatch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/dispatch/hardening"
	"github.com/hai-relay/relay/model"
)

// The installed adapter version is read from the npm package the command
// resolves into, else taken from what the agent last reported.
func TestInstalledVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pkg := filepath.Join(dir, "node_modules", "@scope", "adapter")
	bin := filepath.Join(dir, "node_modules", ".bin")
	for _, d := range []string{filepath.Join(pkg, "dist"), bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(pkg, "package.json"), `{"name":"@scope/adapter","version":"1.2.3"}`)
	write(filepath.Join(pkg, "dist", "package.json"), `{"type":"module"}`) // no version: walk on
	write(filepath.Join(pkg, "dist", "index.js"), "#!/usr/bin/env node\n")
	if err := os.Symlink("../@scope/adapter/dist/index.js", filepath.Join(bin, "adapter")); err != nil {
		t.Fatal(err)
	}
	ad := IdentifyAdapter(filepath.Join(bin, "adapter"))
	if ad.Package != "@scope/adapter" || ad.Version != "1.2.3" || ad.RealPath != filepath.Join(pkg, "dist", "index.js") || len(ad.Fingerprint) != 64 {
		t.Errorf("npm install: %+v", ad)
	}
	if got := installedVersion(ad, "9.9.9"); got.version != "1.2.3" || !strings.Contains(got.how, "package.json") {
		t.Errorf("npm install: %+v", got)
	}
	// The fingerprint is of the files, not of what they say: the same
	// version string with another entry file is another adapter.
	write(filepath.Join(pkg, "dist", "index.js"), "#!/usr/bin/env node\n// planted\n")
	if again := IdentifyAdapter(filepath.Join(bin, "adapter")); again.Version != "1.2.3" || again.Fingerprint == ad.Fingerprint || again.Fingerprint == "" {
		t.Errorf("changed entry file: fingerprint %s, was %s", again.Fingerprint, ad.Fingerprint)
	}
	write(filepath.Join(dir, "native"), "")
	write(filepath.Join(dir, "package.json"), `{"version":"7.7.7"}`) // above node_modules: never reached from inside it
	if got := installedVersion(IdentifyAdapter(filepath.Join(dir, "native")), "9.9.9"); got.version != "7.7.7" {
		t.Errorf("a package.json beside the file: %+v", got)
	}
	lone := filepath.Join(dir, "node_modules", "lone")
	write(lone, "")
	if got := installedVersion(IdentifyAdapter(lone), "9.9.9"); got.version != "9.9.9" || !strings.Contains(got.how, "reported it at initialize") {
		t.Errorf("no package.json: %+v", got)
	}
	if got := installedVersion(IdentifyAdapter(""), ""); got.version != "" || !strings.Contains(got.how, "no session reported a version") {
		t.Errorf("nothing known: %+v", got)
	}
}

// require_verified holds only for a passed verification, recent enough,
// on the version installed now.
func TestHardeningCurrent(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	spec := AgentSpec{Name: "claude", Profiles: hardening.ProfilesFor("claude"), RequireVerified: true, VerifiedWithin: 24 * time.Hour}
	fp := strings.Repeat("ab", 32)
	passed := model.Verification{Status: model.HardeningVerified, At: now.Add(-time.Hour), AdapterVersion: "0.23.1",
		AdapterPackage: "@zed-industries/claude-agent-acp", AdapterPath: "/x/dist/index.js", Fingerprint: fp, Reason: "all 6 attempts stopped"}
	here := installed{"0.23.1", "/x/package.json"}
	same := Adapter{Package: "@zed-industries/claude-agent-acp", Version: "0.23.1", RealPath: "/x/dist/index.js", Fingerprint: fp}
	// Another adapter that says it is 0.23.1: another fingerprint.
	impostor := same
	impostor.Fingerprint = strings.Repeat("cd", 32)
	unprinted := passed
	unprinted.Fingerprint = ""
	old := passed
	old.At = now.Add(-25 * time.Hour)
	failed := passed
	failed.Status, failed.Reason = model.HardeningFailed, "1 of 6 attempts NOT STOPPED"
	for _, c := range []struct {
		name      string
		spec      AgentSpec
		v         model.Verification
		verified  bool
		adapter   Adapter
		installed installed
		current   bool
		reason    string
	}{
		{"passed", spec, passed, true, same, here, true, "the very files installed now"},
		{"never", spec, model.Verification{}, false, same, here, false, "never verified; run `relay agents verify claude`"},
		{"failed", spec, failed, true, same, here, false, "did not pass (failed: 1 of 6 attempts NOT STOPPED)"},
		{"unusable", spec, func() model.Verification {
			u := passed
			u.Status = model.HardeningUnusable
			return u
		}(), true, same, here, false, "did not pass (unusable"},
		{"too old", spec, old, true, same, here, false, "older than verified_within (24h)"},
		{"another adapter, same version", spec, passed, true, impostor, here, false, "but the adapter installed now is"},
		{"before fingerprints", spec, unprinted, true, same, here, false, "predates fingerprints"},
		{"not found", spec, passed, true, Adapter{}, installed{"", "the command is not found"}, false, "cannot be fingerprinted"},
		{"no profile", AgentSpec{Name: "hermes", VerifiedWithin: time.Hour}, model.Verification{}, false, same, here, false, "no hardening profile"},
	} {
		h := hardeningSignal(c.spec, c.v, c.verified, c.adapter, c.installed, now)
		if h.Current != c.current || !strings.Contains(h.CurrentReason+" "+h.Reason, c.reason) {
			t.Errorf("%s: current %v (%s / %s), want %v with %q", c.name, h.Current, h.CurrentReason, h.Reason, c.current, c.reason)
		}
		if h.RequireVerified != c.spec.RequireVerified || h.InstalledVersion != c.installed.version {
			t.Errorf("%s: %+v", c.name, h)
		}
	}
}

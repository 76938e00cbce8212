package dispatch

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hai-relay/relay/model"
)

// OpenCode's redirect adds the loopback provider to the profile's inline
// config without touching a key of it: its permission rules depend on key
// order (the first config that sets a key fixes its place, and the last
// matching rule wins).
func TestOpencodeRedirectKeepsTheProfileConfig(t *testing.T) {
	t.Parallel()
	rule := opencodeProfile.Rules[model.ModeReadOnly].withNonce("relay-n0nce")
	launch, err := opencodeVerify.Redirect(ScriptedModel{"http://127.0.0.1:4242", testKey}, rule.Env)
	if err != nil {
		t.Fatal(err)
	}
	merged, ok := envValue(launch.Env, "OPENCODE_CONFIG_CONTENT")
	ruled, _ := envValue(rule.Env, "OPENCODE_CONFIG_CONTENT")
	if !ok || !strings.HasPrefix(merged, strings.TrimSuffix(ruled, "}")+",") {
		t.Fatalf("the merged config does not start with the profile's, byte for byte:\n%s\n%s", merged, ruled)
	}
	var cfg struct {
		Permission map[string]string `json:"permission"`
		Agent      map[string]any    `json:"agent"`
		Model      string            `json:"model"`
		SmallModel string            `json:"small_model"`
		Provider   map[string]struct {
			NPM     string `json:"npm"`
			Options struct {
				BaseURL string `json:"baseURL"`
			} `json:"options"`
			Models map[string]struct {
				ToolCall bool `json:"tool_call"`
			} `json:"models"`
		} `json:"provider"`
	}
	if err := json.Unmarshal([]byte(merged), &cfg); err != nil {
		t.Fatalf("merged config: %v\n%s", err, merged)
	}
	p := cfg.Provider[verifyProvider]
	if cfg.Model != "relay-verify/m" || cfg.SmallModel != "relay-verify/m" || p.NPM != "@ai-sdk/openai-compatible" ||
		p.Options.BaseURL != "http://127.0.0.1:4242/v1" || !p.Models["m"].ToolCall {
		t.Errorf("provider not added as expected: %s", merged)
	}
	if cfg.Permission["*"] != "deny" || cfg.Agent["relay-n0nce"] == nil {
		t.Errorf("the profile's permissions or its session agent are gone: %s", merged)
	}
	if !slices.Contains(launch.Env, "OPENCODE_DISABLE_MODELS_FETCH=1") {
		t.Errorf("OpenCode would fetch its model list: %q", launch.Env)
	}

	// Without a rule (the test-only unhardened switch) the provider alone.
	bare, err := opencodeVerify.Redirect(ScriptedModel{"http://127.0.0.1:1", testKey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := envValue(bare.Env, "OPENCODE_CONFIG_CONTENT"); !json.Valid([]byte(v)) || !strings.HasPrefix(v, `{"provider":`) {
		t.Errorf("config without a rule: %s", v)
	}
	// A config that already names a provider is not silently overridden.
	if _, err := opencodeVerify.Redirect(ScriptedModel{"http://x", testKey}, []string{`OPENCODE_CONFIG_CONTENT={"model":"theirs/m"}`}); err == nil {
		t.Error("a config that already sets model was merged")
	}
	if _, err := addJSONKeys("[1]", []string{"a"}, []any{1}); err == nil {
		t.Error("a JSON array was taken for an object")
	}
}

// Each profile's redirect names the scripted model and leaves no other way
// out that the relay knows of.
// testKey stands for a verification's own key.
const testKey = "relay-verify-test-key"

func TestRedirectsPointAtTheScriptedModel(t *testing.T) {
	t.Parallel()
	const url = "http://127.0.0.1:4242"
	for p, want := range map[*Profile][]string{
		claudeZed: {"ANTHROPIC_BASE_URL=" + url, "ANTHROPIC_API_KEY=" + testKey, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"},
		claudeACP: {"ANTHROPIC_BASE_URL=" + url, "ANTHROPIC_API_KEY=" + testKey, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"},
		codexZed:  {`model_provider="relay-verify"`, `base_url="` + url + `/v1"`, `wire_api="responses"`, "RELAY_VERIFY_KEY=" + testKey},
		codexACP: {`"model_provider":"relay-verify"`, `"base_url":"` + url + `/v1"`, `"wire_api":"responses"`, "RELAY_VERIFY_KEY=" + testKey,
			`"model":"relay-verify-model"`},
		geminiProfile: {"GOOGLE_GEMINI_BASE_URL=" + url, "GEMINI_API_KEY=" + testKey},
		hermesProfile: {hermesVerifyURLVar + "=" + url + "/v1", "OPENAI_API_KEY=" + testKey},
	} {
		l, err := p.Verify.Redirect(ScriptedModel{url, testKey}, p.Rules[model.ModeReadOnly].Env)
		if err != nil {
			t.Fatal(err)
		}
		js, _ := json.Marshal(l.EnvJSON)
		all := strings.Join(append(append(l.Env, l.Args...), string(js)), "\n")
		for _, w := range want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: redirect %q lacks %q", p.Name, all, w)
			}
		}
	}
	claude, _ := claudeVerify.Redirect(ScriptedModel{url, testKey}, nil)
	for _, v := range []string{"ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"} {
		if !slices.Contains(claude.Unset, v) {
			t.Errorf("claude's redirect keeps %s", v)
		}
	}
}

// Gemini is verified only when its settings select an auth type that goes
// to GOOGLE_GEMINI_BASE_URL; otherwise it would log in and go to the
// network, and the relay never calls its authenticate.
func TestGeminiVerificationRefusesAnotherLogin(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("GEMINI_CLI_HOME", "")
	t.Setenv("GEMINI_CLI_SYSTEM_SETTINGS_PATH", filepath.Join(home, "no-system-settings.json"))
	settings := filepath.Join(home, ".gemini", "settings.json")
	if err := os.MkdirAll(filepath.Dir(settings), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ content, refusal string }{
		{"", ""}, // no file
		{`{"security":{"auth":{"selectedType":"gemini-api-key"}}}`, ""},
		{`{"security":{"auth":{"selectedType":"gateway"}}}`, ""},
		{`{"general":{}}`, ""},
		{`{"security":{"auth":{"selectedType":"oauth-personal"}}}`, `selects auth type "oauth-personal"`},
		{`{"selectedAuthType":"vertex-ai"}`, `selects auth type "vertex-ai"`},
		{"{ // a comment\n}", "not plain JSON"},
	} {
		_ = os.Remove(settings)
		if c.content != "" {
			if err := os.WriteFile(settings, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		got := geminiAuthRefusal()
		if (c.refusal == "") != (got == "") || !strings.Contains(got, c.refusal) {
			t.Errorf("settings %q: refusal %q, want %q", c.content, got, c.refusal)
		}
	}
}

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
	spec := AgentSpec{Name: "claude", Profiles: ProfilesFor("claude"), RequireVerified: true, VerifiedWithin: 24 * time.Hour}
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

package hardening

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hai-relay/relay/model"
)

// OpenCode's redirect adds the loopback provider to the profile's inline
// config without touching a key of it: its permission rules depend on key
// order (the first config that sets a key fixes its place, and the last
// matching rule wins).
func TestOpencodeRedirectKeepsTheProfileConfig(t *testing.T) {
	t.Parallel()
	rule := opencodeProfile.Rules[model.ModeReadOnly].WithNonce("relay-n0nce")
	launch, err := opencodeVerify.Redirect(ScriptedModel{"http://127.0.0.1:4242", testKey}, rule.Env)
	if err != nil {
		t.Fatal(err)
	}
	merged, ok := EnvValue(launch.Env, "OPENCODE_CONFIG_CONTENT")
	ruled, _ := EnvValue(rule.Env, "OPENCODE_CONFIG_CONTENT")
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
	if v, _ := EnvValue(bare.Env, "OPENCODE_CONFIG_CONTENT"); !json.Valid([]byte(v)) || !strings.HasPrefix(v, `{"provider":`) {
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

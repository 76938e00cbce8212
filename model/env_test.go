package model_test

import (
	"slices"
	"testing"

	"github.com/hai-relay/relay/model"
)

// The well-known code-loading variables are on the list, by exact name or
// family; the variables agents legitimately need are not.
func TestCodeLoadingVar(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"NODE_OPTIONS", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES",
		"BASH_ENV", "ENV", "PYTHONSTARTUP", "PYTHONPATH", "BASH_FUNC_ls%%", "GIT_CONFIG_KEY_0", "GIT_SSH_COMMAND", "JAVA_TOOL_OPTIONS"} {
		if !model.CodeLoadingVar(n) {
			t.Errorf("%s is not a code-loading variable", n)
		}
	}
	for _, n := range []string{"PATH", "HOME", "LANG", "TZ", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CODEX_HOME", "GEMINI_API_KEY",
		"XDG_CONFIG_HOME", "HTTPS_PROXY", "NODE_EXTRA_CA_CERTS", "LDFLAGS", "ENVIRONMENT", "GIT_AUTHOR_NAME"} {
		if model.CodeLoadingVar(n) {
			t.Errorf("%s is taken for a code-loading variable", n)
		}
	}
	if l := model.CodeLoadingVars(); !slices.Contains(l, "NODE_OPTIONS") || !slices.Contains(l, "LD_*") {
		t.Errorf("CodeLoadingVars() = %v, want the names and the families", l)
	}
}

func TestWithoutCodeLoading(t *testing.T) {
	t.Parallel()
	env := []string{"PATH=/usr/bin", "NODE_OPTIONS=--require /x.js", "HOME=/h", "LD_PRELOAD=/x.so", "NODE_OPTIONS=again", "NOEQUALS"}
	kept, removed := model.WithoutCodeLoading(env)
	if want := []string{"PATH=/usr/bin", "HOME=/h", "NOEQUALS"}; !slices.Equal(kept, want) {
		t.Errorf("kept %q, want %q", kept, want)
	}
	if want := []string{"NODE_OPTIONS", "LD_PRELOAD"}; !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	if env[1] != "NODE_OPTIONS=--require /x.js" {
		t.Error("the input was changed")
	}
}

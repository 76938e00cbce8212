package dispatch_test

import (
	"slices"
	"testing"

	"github.com/hai-relay/relay/dispatch"
	"github.com/hai-relay/relay/model"
)

// No code-loading variable reaches an agent, whether it comes from the
// daemon's own environment or from the entries the dispatcher adds; the
// other variables of both do. Not parallel: it sets the test process's
// environment, which is the daemon's here.
func TestAgentEnvironmentHasNoCodeLoadingVariables(t *testing.T) {
	t.Setenv("BASH_ENV", "/planted/bashrc")
	t.Setenv("PYTHONPATH", "/planted/py")
	t.Setenv("RELAY_ENV_TEST_KEPT", "1")
	e := newEnv(t, func(o *dispatch.Options) {
		o.Env = append(o.Env, "NODE_OPTIONS=--require /planted/hook.js", "LD_PRELOAD=/planted/hook.so", "GIT_CONFIG_KEY_0=core.fsmonitor", "ADDED_KEPT=1")
	})
	out, _ := e.run(t, e.task("fake", "echo hello", model.ModeReadOnly))
	wantOutcome(t, out, model.StateCompleted, "")
	starts := e.events(t, "start")
	if len(starts) != 1 {
		t.Fatalf("%d agent starts, want 1", len(starts))
	}
	var env []string
	for _, n := range starts[0]["env_names"].([]any) {
		env = append(env, n.(string))
	}
	var leaked, lost []string
	for _, n := range []string{"BASH_ENV", "PYTHONPATH", "NODE_OPTIONS", "LD_PRELOAD", "GIT_CONFIG_KEY_0"} {
		if slices.Contains(env, n) {
			leaked = append(leaked, n)
		}
	}
	for _, n := range []string{"RELAY_ENV_TEST_KEPT", "ADDED_KEPT", "FAKEAGENT_LOG", "PATH"} {
		if !slices.Contains(env, n) {
			lost = append(lost, n)
		}
	}
	if len(leaked)+len(lost) > 0 {
		t.Errorf("the agent's environment holds the code-loading variables %v and lacks %v; it is %v", leaked, lost, env)
	}
}

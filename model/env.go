package model

import (
	"slices"
	"strings"
)

// Code-loading variables are environment variables whose purpose is to
// make a program load or run code it would not otherwise: a library
// preloaded into every dynamically linked process, a module required
// into every Node process, a file a shell sources on start, a command
// git runs. None of them reaches a process the relay starts (the daemon,
// an agent, the authority adapter), whoever set them: the daemon drops
// them from its own environment when it starts, the dispatcher from every
// agent's and the authority client from the adapter's (WithoutCodeLoading),
// and the config refuses to name them. One list, here, beside the check
// that applies it, so that every path uses the same one.
//
// A user who needs one of them for an agent (a custom Node build that
// wants LD_LIBRARY_PATH) sets it in a wrapper script and makes that
// script the agent's command: what the wrapper runs is then the user's
// choice, written in the user's config, not inherited from whoever
// started the daemon.
var codeLoadingNames = []string{
	// Shells: files sourced on start, functions imported, prompts run.
	"BASH_ENV", "ENV", "ZDOTDIR", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND",
	// Node.
	"NODE_OPTIONS", "NODE_PATH", "NODE_REPL_EXTERNAL_MODULE",
	// Python.
	"PYTHONSTARTUP", "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONBREAKPOINT", "PYTHONINSPECT",
	// Perl and Ruby.
	"PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB", "RUBYOPT", "RUBYLIB",
	// The JVM.
	"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS",
	// glibc's character-set conversion modules (shared objects).
	"GCONV_PATH",
	// git, which agents run in every task's cwd: configuration injected
	// from the environment (core.fsmonitor, core.sshCommand run
	// commands), and the programs it runs.
	"GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG",
	"GIT_EXEC_PATH", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF", "GIT_TEMPLATE_DIR",
}

// codeLoadingPrefixes are the families matched by prefix: the dynamic
// loader's (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, …) and macOS's
// (DYLD_INSERT_LIBRARIES, …), bash's exported functions
// (BASH_FUNC_name%%) and git's numbered config entries.
var codeLoadingPrefixes = []string{"LD_", "DYLD_", "BASH_FUNC_", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"}

// CodeLoadingVar reports whether the environment variable name is a
// code-loading variable: one the relay never passes on.
func CodeLoadingVar(name string) bool {
	if slices.Contains(codeLoadingNames, name) {
		return true
	}
	for _, p := range codeLoadingPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// WithoutCodeLoading returns env ("NAME=value" entries) without its
// code-loading variables, and the names it removed (in env's order, each
// once). env itself is not changed.
func WithoutCodeLoading(env []string) (kept, removed []string) {
	kept = make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if CodeLoadingVar(name) {
			if !slices.Contains(removed, name) {
				removed = append(removed, name)
			}
			continue
		}
		kept = append(kept, kv)
	}
	return kept, removed
}

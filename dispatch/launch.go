package dispatch

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// How users launch adapters. Most run an adapter by the executable its
// package installs (claude-agent-acp, gemini); some name an interpreter
// and the script, as `node /…/node_modules/@google/gemini-cli/bundle/gemini.js
// --acp`. The adapter is then the script, not the interpreter: it is
// identified by the package above the script. A launcher that fetches a
// package at run time (npx, pnpm dlx, bunx, yarn dlx, uvx …) is refused:
// what it runs is whatever the registry serves at each start, so nothing
// identified or verified holds for it.

// interpreter says how to find the script in an interpreter's arguments.
type interpreter struct {
	// valued are the options that take the next argument as their value.
	valued []string
	// inline are the options whose value is the program itself (no script).
	inline []string
	// subcommands are skipped before the script (deno run, bun run).
	subcommands []string
}

var (
	nodeInterpreter = interpreter{
		valued: []string{"-r", "--require", "--import", "--loader", "--experimental-loader", "-C", "--conditions",
			"--input-type", "--title", "--env-file", "--stack-size", "--max-old-space-size", "--inspect-port", "--watch-path"},
		inline: []string{"-e", "--eval", "-p", "--print", "-"},
	}
	bunInterpreter = interpreter{
		valued:      []string{"-r", "--preload", "--cwd", "-c", "--config", "--env-file", "--tsconfig-override", "--conditions"},
		inline:      []string{"-e", "--eval", "-p", "--print"},
		subcommands: []string{"run"},
	}
	denoInterpreter = interpreter{
		valued: []string{"-c", "--config", "--import-map", "--lock", "--cert", "--location", "--seed", "--v8-flags",
			"--env-file", "--inspect", "--ext"},
		inline:      []string{"eval", "repl"},
		subcommands: []string{"run"},
	}
	pythonInterpreter = interpreter{
		valued: []string{"-W", "-X", "-Q"},
		inline: []string{"-c", "-m", "-"},
	}
	pythonName = regexp.MustCompile(`^python[0-9]*(\.[0-9]+)?$`)
)

// interpreterOf returns the interpreter program names, or nil.
func interpreterOf(program string) *interpreter {
	switch base := filepath.Base(program); {
	case base == "node" || base == "nodejs":
		return &nodeInterpreter
	case base == "bun":
		return &bunInterpreter
	case base == "deno":
		return &denoInterpreter
	case pythonName.MatchString(base):
		return &pythonInterpreter
	}
	return nil
}

// script returns the script in an interpreter's arguments, or "" and why
// there is none.
func (in *interpreter) script(args []string) (string, string) {
	sub := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(a, "=")
		switch {
		case a == "--":
			if i+1 < len(args) {
				return args[i+1], ""
			}
			return "", "no script after --"
		case slices.Contains(in.inline, name):
			return "", fmt.Sprintf("it runs a program given inline (%s), not a script file", name)
		case !sub && slices.Contains(in.subcommands, a):
			sub = true
		case strings.HasPrefix(a, "-"):
			if !hasValue && slices.Contains(in.valued, a) {
				i++ // the option's value
			}
		default:
			return a, ""
		}
	}
	return "", "no script among its arguments"
}

// IdentifyCommand identifies the adapter of a command: path is its
// program as resolved on the daemon's PATH ("" when not found) and args
// its arguments. A program that is an interpreter (node, bun, deno,
// python) runs a script: the adapter is the script, identified by the
// package above it, as IdentifyAdapter does for an executable. A script
// that cannot be found in the arguments, or is not an absolute path,
// leaves the adapter unidentified on disk (Err says why): the agent then
// names itself at initialize.
func IdentifyCommand(path string, args []string) Adapter {
	in := interpreterOf(path)
	if path == "" || in == nil {
		return IdentifyAdapter(path)
	}
	script, why := in.script(args)
	switch {
	case script == "":
		return Adapter{Path: path, Err: filepath.Base(path) + ": " + why}
	case !filepath.IsAbs(script):
		return Adapter{Path: path, Err: fmt.Sprintf("%s runs the script %s, which is not an absolute path", filepath.Base(path), script)}
	}
	a := IdentifyAdapter(script)
	a.Interpreter = path
	return a
}

// launcher is a program (and subcommand) that fetches a package at run
// time, and how to install that package once instead.
type launcher struct {
	program string
	sub     []string // the subcommand that fetches ("dlx"), nil for the program itself
	install string   // the install command, with %s for the package
	// valued are its options that take the next argument as their value;
	// pkgOption names the package when it is one of them (npx -p PKG).
	valued    []string
	pkgOption []string
}

var launchers = []launcher{
	{program: "npx", install: "npm install -g %s", valued: []string{"-p", "--package", "-c", "--call"}, pkgOption: []string{"-p", "--package"}},
	{program: "npm", sub: []string{"exec"}, install: "npm install -g %s", valued: []string{"-p", "--package", "-c", "--call"}, pkgOption: []string{"-p", "--package"}},
	{program: "npm", sub: []string{"x"}, install: "npm install -g %s", valued: []string{"-p", "--package", "-c", "--call"}, pkgOption: []string{"-p", "--package"}},
	{program: "pnpx", install: "pnpm add -g %s"},
	{program: "pnpm", sub: []string{"dlx"}, install: "pnpm add -g %s", valued: []string{"--package"}, pkgOption: []string{"--package"}},
	{program: "yarn", sub: []string{"dlx"}, install: "npm install -g %s", valued: []string{"-p", "--package"}, pkgOption: []string{"-p", "--package"}},
	{program: "bunx", install: "bun add -g %s", valued: []string{"-p", "--package"}, pkgOption: []string{"-p", "--package"}},
	{program: "bun", sub: []string{"x"}, install: "bun add -g %s", valued: []string{"-p", "--package"}, pkgOption: []string{"-p", "--package"}},
	{program: "uvx", install: "uv tool install %s", valued: []string{"--from", "--with", "--python", "-p"}, pkgOption: []string{"--from"}},
	{program: "uv", sub: []string{"tool", "run"}, install: "uv tool install %s", valued: []string{"--from", "--with", "--python", "-p"}, pkgOption: []string{"--from"}},
	{program: "pipx", sub: []string{"run"}, install: "pipx install %s", valued: []string{"--spec", "--python"}, pkgOption: []string{"--spec"}},
}

// RefuseLauncher says why a command may not launch an agent ("" when it
// may): its program fetches a package at run time (npx, npm exec, pnpm
// dlx, pnpx, yarn dlx, bunx, bun x, uvx, uv tool run, pipx run, or deno
// running an npm:, jsr: or URL specifier). The reason names the command
// that installs the package once, after which the command names the
// executable it installed.
func RefuseLauncher(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	program, args := filepath.Base(argv[0]), argv[1:]
	if program == "deno" {
		if s, _ := denoInterpreter.script(args); remoteSpecifier(s) {
			pkg := strings.TrimPrefix(s, "npm:")
			install := "npm install -g " + pkg
			if !strings.HasPrefix(s, "npm:") {
				install = "deno install --global " + s
			}
			return refusal("deno run "+s, s, install)
		}
		return ""
	}
	for _, l := range launchers {
		if l.program != program || len(args) < len(l.sub) || !slices.Equal(args[:len(l.sub)], l.sub) {
			continue
		}
		pkg := l.pkg(args[len(l.sub):])
		name := strings.Join(append([]string{l.program}, l.sub...), " ")
		if pkg == "" {
			return fmt.Sprintf("%s fetches a package at run time, at every start: what runs is whatever the registry serves then, "+
				"never the adapter the relay identified and verified; install the adapter once and name the executable it installs", name)
		}
		return refusal(name, pkg, fmt.Sprintf(l.install, pkg))
	}
	return ""
}

// pkg is the package a launcher's arguments fetch: its package option's
// value, else the first argument that is not an option.
func (l launcher) pkg(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(a, "=")
		switch {
		case a == "--":
			if i+1 < len(args) {
				return args[i+1]
			}
			return ""
		case slices.Contains(l.pkgOption, name):
			if hasValue {
				return value
			}
			if i+1 < len(args) {
				return args[i+1]
			}
			return ""
		case strings.HasPrefix(a, "-"):
			if !hasValue && slices.Contains(l.valued, a) {
				i++
			}
		default:
			return a
		}
	}
	return ""
}

func refusal(launcher, pkg, install string) string {
	return fmt.Sprintf("%s fetches %s at run time, at every start: what runs is whatever the registry serves then, "+
		"never the adapter the relay identified and verified; install it once with `%s`, then name the executable it installs",
		launcher, pkg, install)
}

// remoteSpecifier reports whether a deno script is fetched, not a file.
func remoteSpecifier(s string) bool {
	for _, p := range []string{"npm:", "jsr:", "http://", "https://"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// CheckCommand says why argv may not launch an agent ("" when it may):
// a launcher that fetches the adapter at run time (RefuseLauncher), or an
// interpreter whose script is a relative path, which the interpreter
// would look up in each task's cwd, a directory the task's project
// controls.
func CheckCommand(argv []string) string {
	if why := RefuseLauncher(argv); why != "" || len(argv) == 0 {
		return why
	}
	in := interpreterOf(argv[0])
	if in == nil {
		return ""
	}
	prog := filepath.Base(argv[0])
	if s, _ := in.script(argv[1:]); s != "" && !filepath.IsAbs(s) && !remoteSpecifier(s) {
		return fmt.Sprintf("%s runs the script %s, a relative path that it would look up in each task's cwd "+
			"(a directory the task's project controls); give the script's absolute path", prog, s)
	}
	if why := in.cwdLoads(prog, argv[1:]); why != "" {
		return why
	}
	return ""
}

// cwdLoads says which of an interpreter's options before its script would
// load code found through each task's cwd ("" when none): a module
// preloaded by a name or a relative path (node -r, --import, --loader;
// bun --preload), python's -m (the cwd comes first on its module path).
func (in *interpreter) cwdLoads(prog string, args []string) string {
	loaders := []string{"-r", "--require", "--import", "--loader", "--experimental-loader", "--preload"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(a, "=")
		switch {
		case a == "--" || !strings.HasPrefix(a, "-") && !slices.Contains(in.subcommands, a):
			return "" // the script: what follows is its own
		case in == &pythonInterpreter && name == "-m":
			return fmt.Sprintf("%s -m finds the module through each task's cwd first (a directory the task's project controls); "+
				"name the adapter's installed executable, or its script's absolute path", prog)
		case slices.Contains(loaders, name):
			if !hasValue && i+1 < len(args) {
				i++
				value = args[i]
			}
			if !filepath.IsAbs(value) {
				return fmt.Sprintf("%s %s %s loads a module found through each task's cwd (a directory the task's project controls); "+
					"give its absolute path", prog, name, value)
			}
		case !hasValue && slices.Contains(in.valued, a):
			i++
		}
	}
	return ""
}

package dispatch

import "slices"

// maskBinds returns the bubblewrap mount arguments of masks for a session
// in cwd (no bubblewrap prefix), with entries bound back read-only, for
// every masked directory but those skip names.
func maskBinds(masks []Mask, cwd, empty string, skip func(dir string) bool) ([]string, error) {
	full, err := maskArgv(masks, cwd, empty)
	if err != nil {
		return nil, err
	}
	// Drop the prefix maskArgv puts before the mask arguments.
	i := slices.Index(full, "/") + 2
	for i < len(full) && (full[i] == "--unshare-user" || full[i] == "--uid" || full[i] == "--gid") {
		if full[i] == "--unshare-user" {
			i++
		} else {
			i += 2
		}
	}
	var out, group []string
	dir := ""
	flush := func() {
		if dir == "" || !skip(dir) {
			out = append(out, group...)
		}
		group, dir = nil, ""
	}
	for args := full[i:]; len(args) > 0; {
		n := 3
		if args[0] == "--tmpfs" {
			flush()
			dir, n = args[1], 2
		}
		a := slices.Clone(args[:n])
		if a[0] == "--dev-bind-try" {
			a[0] = "--ro-bind-try"
		}
		group = append(group, a...)
		args = args[n:]
		if a[0] == "--chmod" {
			flush()
		}
	}
	flush()
	return out, nil
}

package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the relay's version; release builds set it with
// -ldflags "-X main.Version=v1.2.3".
var Version = "dev"

func init() {
	register(command{name: "version", summary: "print the relay's version", usage: "[--json]", setup: versionCommand})
}

func versionInfo() map[string]string {
	v := map[string]string{"version": Version, "go": runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				v["revision"] = s.Value
			}
		}
	}
	return v
}

func versionCommand(f *flags) runFunc {
	return func(_ context.Context, e *cliIO) error {
		v := versionInfo()
		if f.json {
			return printJSON(e.stdout, v)
		}
		fmt.Fprintf(e.stdout, "relay %s (%s", v["version"], v["go"])
		if r := v["revision"]; r != "" {
			fmt.Fprintf(e.stdout, ", %s", r)
		}
		fmt.Fprintln(e.stdout, ")")
		return nil
	}
}

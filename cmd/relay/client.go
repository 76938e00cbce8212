package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/hai-relay/relay/facade/socketapi"
	"github.com/hai-relay/relay/model"
)

// dial returns a socket client for the home's daemon. Before every new
// connection the home is checked as the daemon checks it (secureHome,
// checkHomeFiles), and the client refuses a socket served by another uid
// (socketapi.Client checks SO_PEERCRED); both refusals are daemon_unavailable
// and name what was found. With autostart, a missing daemon is started in
// the background (detached, its own session) and waited for; concurrent
// autostarts end with one daemon because the home lock refuses the
// others. warn gets a line when the check took group or other access away
// from the home.
func dial(home, agent string, autostart bool, warn io.Writer) *socketapi.Client {
	o := socketapi.ClientOptions{Agent: agent, BeforeDial: func() error { return clientHome(home, false, warn) }}
	if autostart {
		o.Autostart = func(ctx context.Context) error { return startDaemon(home, agent, warn) }
	}
	return socketapi.NewClient(sockPath(home), o)
}

// clientHome is a client's check of the home: secureHome and
// checkHomeFiles with the clients' code. A missing home passes unless
// create (there is nothing to trust; the dial finds no daemon).
func clientHome(home string, create bool, warn io.Writer) error {
	exists, fix, err := secureHome(home, create, model.CodeDaemonUnavailable)
	if err != nil {
		return err
	}
	if fix != nil {
		fmt.Fprintf(warn, "relay: the relay home %s was open to group or others (mode %04o); access taken away (now %04o)\n", home, fix.from, fix.to)
	}
	if !exists {
		return nil
	}
	return checkHomeFiles(home, model.CodeDaemonUnavailable)
}

// startDaemon starts `relay daemon` on home in the background, never on a
// home the current user does not own (the daemon would refuse it too, but
// nothing is started at all), for the facade of agent.
//
// The daemon serves every agent of every project, while this facade's
// environment comes from its MCP client's config, which a project can set
// (a checked-in .mcp.json with an env block): the daemon gets only what
// autostartEnviron takes from it, runs in its home rather than in this
// facade's directory, and is told who started it (daemonenv.go).
func startDaemon(home, agent string, warn io.Writer) error {
	if err := clientHome(home, true, warn); err != nil {
		return err
	}
	cfg, err := loadHomeConfig(home, model.CodeDaemonUnavailable)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer devnull.Close()
	// --autostarted: a daemon nobody started by hand exits once idle
	// ([daemon] idle_timeout) and takes little of its environment.
	args := []string{"daemon", "--home", home, "--autostarted", "--by-pid", strconv.Itoa(os.Getpid())}
	if agent != "" {
		args = append(args, "--by-agent", agent)
	}
	if cwd, err := os.Getwd(); err == nil {
		args = append(args, "--by-cwd", cwd)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = autostartEnviron(os.Environ(), cfg.Daemon)
	cmd.Dir = home
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull // it logs to relay.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() // reap it if it exits while we run (a lost lock race)
	return nil
}

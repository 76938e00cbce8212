package main

import (
	"context"
	"os"
	"os/exec"
	"syscall"

	"github.com/hai-relay/relay/facade"
)

// dial returns a socket client for the home's daemon. With autostart, a
// missing daemon is started in the background (detached, its own session)
// and waited for; concurrent autostarts end with one daemon because the
// home lock refuses the others.
func dial(home, agent string, autostart bool) *facade.Client {
	o := facade.ClientOptions{Agent: agent}
	if autostart {
		o.Autostart = func(ctx context.Context) error { return startDaemon(home) }
	}
	return facade.NewClient(sockPath(home), o)
}

func startDaemon(home string) error {
	if err := ensureHome(home); err != nil {
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
	cmd := exec.Command(exe, "daemon", "--home", home)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull // it logs to relay.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() // reap it if it exits while we run (a lost lock race)
	return nil
}

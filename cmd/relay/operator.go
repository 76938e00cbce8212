package main

import "github.com/hai-relay/relay/facade/socketapi"

// operator returns a socket client for an operator command. Operator
// commands never start a daemon: with none running there is nothing to
// operate on, and the error says how to start one.
func operator(e *cliIO, f *flags) (*socketapi.Client, error) {
	c, _, err := operatorAt(e, f)
	return c, err
}

// operatorAt is operator, and the home it dials.
func operatorAt(e *cliIO, f *flags) (*socketapi.Client, string, error) {
	home, err := resolveHome(f.home, e.getenv)
	if err != nil {
		return nil, "", err
	}
	return dial(home, "", false, e.stderr), home, nil
}

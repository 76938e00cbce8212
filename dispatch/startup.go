package dispatch

import (
	"fmt"
	"time"

	"github.com/hai-relay/relay/model"
)

// The start-up deadline of a task's run (Options.StartTimeout): from the
// spawn until the session is set up — initialize, session/new and, under
// a hardening profile, the session's mode and options — the agent has
// startTimeout, far shorter than the task timeout. An agent that never
// answers one of them (hung, or waiting for a login or a prompt of its
// own) is killed when it passes, and the task fails agent_start_timeout,
// so it holds its dispatch slot for the start-up deadline, not for the
// whole task timeout. The deadline no longer applies once the session is
// set up (drive sets s.setUp, under s.mu, in the same step that ends the
// setup): a stop it asks for after that is ignored.

// causeStartTimeout: the start-up deadline passed before the session was
// set up; the agent is killed at once (no session/cancel: there is no
// turn to cancel). It is declared here, with the deadline it belongs to.
const causeStartTimeout stopCause = 100

// armStart starts the start-up deadline, if the session has one.
func (s *session) armStart() {
	if s.startTimeout <= 0 {
		return
	}
	s.startTimer = time.AfterFunc(s.startTimeout, func() {
		s.mu.Lock()
		stage, over := s.stage, s.setUp || s.cause != causeNone
		s.mu.Unlock()
		if over {
			return // set up in time, or already stopping
		}
		s.log.Printf("agent_start_timeout: the agent is still at %s after %s; killing it", stage, model.ShortDuration(s.startTimeout))
		s.stop(causeStartTimeout)
	})
}

// disarmStart stops the start-up deadline's timer (teardown).
func (s *session) disarmStart() {
	if s.startTimer != nil {
		s.startTimer.Stop()
	}
}

// startTimeoutMessage is an agent_start_timeout task's message; stage is
// where the agent was when the deadline passed.
func (s *session) startTimeoutMessage(at stage) string {
	what := map[stage]string{
		stageSpawn:      "had not been started yet",
		stageInitialize: "had not answered initialize",
		stageNewSession: "had not answered session/new",
		stageSetMode:    "had not answered the request setting the session's mode",
		stageHardening:  "had not finished setting up the session",
	}[at]
	if what == "" {
		what = "was still at " + string(at)
	}
	return fmt.Sprintf("%s %s within limits.start_timeout (%s) and was killed; its dispatch slot is free",
		s.agent, what, model.ShortDuration(s.startTimeout))
}

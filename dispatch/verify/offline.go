package verify

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hai-relay/relay/dispatch/hardening"
	"github.com/hai-relay/relay/model"
)

// offlineOnly is the report of a verification whose agent's model cannot
// be pointed at the scripted model (VerifySpec.NoModel, Cursor's): nothing
// is started; every attempt and control the profile's modes would have is
// listed as not run, with why, and only the checks that need no model are
// made. It is never verified: unverified when those checks pass, failed
// when one does not.
func offlineOnly(rep model.Verification, prof *hardening.Profile, vs *hardening.VerifySpec) model.Verification {
	why := "not verifiable offline: " + vs.NoModel
	var notRun []string
	for _, m := range model.AllModes() {
		if _, ok := prof.Rules[m]; !ok {
			continue
		}
		attempts := AllAttempts()
		if m == model.ModeStateChanging {
			attempts = stateChangingAttempts
		}
		for _, a := range append(slices.Clip(attempts), AttemptReadControl) {
			rep.Attempts = append(rep.Attempts, model.VerifyAttempt{Name: string(a), Mode: m,
				Control: a == AttemptReadControl, StoppedBy: model.StopNotRun, Detail: why})
			notRun = append(notRun, string(m)+" "+string(a))
		}
	}
	var ran, failed []string
	if vs.Offline != nil {
		for _, c := range vs.Offline() {
			verdict := "passed"
			if !c.Passed {
				verdict = "FAILED"
				failed = append(failed, c.Name)
			}
			ran = append(ran, fmt.Sprintf("%s %s (%s)", c.Name, verdict, c.Detail))
		}
	}
	checked := "no check could be made without the model"
	if len(ran) > 0 {
		checked = "checked without the model: " + strings.Join(ran, "; ")
	}
	rep.Status = model.HardeningUnverified
	if len(failed) > 0 {
		rep.Status = model.HardeningFailed
	}
	rep.Reason = clipLine(fmt.Sprintf("%s; not run: %s; %s", why, strings.Join(notRun, ", "), checked), 1000)
	return rep
}

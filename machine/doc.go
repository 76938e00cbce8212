// Package machine is HAI-Relay's task engine. It builds one
// qmuntal/stateless machine per task operation from the lifecycle table in
// spec, with the task's state kept in the store (external storage), and
// dispatch as the entry action of authorized, which runs only after
// authorized is durably stored.
//
// The gates (the table is spec.Gates) are evaluated by gates.Evaluate
// before anything is fired; the engine then fires exactly one trigger
// chosen from the verdicts (authorize, or the reject or block the first
// failing gate leads to). The authorize transition's guards, one per gate
// and named after it, are pure: they read the verdicts passed as the
// trigger's argument. A trigger the lifecycle does not permit is an
// *model.Error with CodeInvalidTransition.
//
// Every transition — Fire, a submission's gates, Started, Finished,
// Cancel, recovery — follows one protocol (see transition): lock the
// task, read it, decide the step, fire it through a fresh machine whose
// mutator is the store's compare-and-set (event and audit row in the same
// transaction). A transition computed from a stale state is refused with
// CodeStaleState rather than overwriting a newer one.
package machine

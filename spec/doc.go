// Package spec holds what the relay promises, as data: the task lifecycle
// table (states, triggers, edges and the gates on them), the catalogue of
// stable codes with the state each leads to, the agent name rule, and the
// wire types of the authority adapter contract; its tests hold the request
// bounds as spec/errors.md documents them (bounds_test.go). The
// configuration file is read by the command (cmd/relay/config).
//
// The machine is built from Lifecycle, spec/errors.md is generated from
// Catalogue, and tests keep both in step with the model's constants.
package spec

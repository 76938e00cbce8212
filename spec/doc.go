// Package spec holds what the relay promises, as data: the task lifecycle
// table (states, triggers, edges and the gates on them), the catalogue of
// stable codes with the state each leads to, the request bounds, the agent
// name rule, and the wire types of the authority adapter contract. The
// configuration file is read by the command (cmd/relay/config).
//
// The machine is built from Lifecycle, spec/errors.md is generated from
// Catalogue, and tests keep both in step with the model's constants.
package spec

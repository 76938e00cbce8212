package model

import "slices"

// Test-only API for the external tests.

// NoticeOf is the structured notice of a task as it ends.
func NoticeOf(t Task) Notice {
	return Notice{TaskID: t.ID, State: t.State, Code: t.Code, Message: t.Message, Result: t.Result}
}

// CodeLoadingVars lists the code-loading variables: each exact name, then
// each prefix family as "PREFIX*".
func CodeLoadingVars() []string {
	out := slices.Clone(codeLoadingNames)
	for _, p := range codeLoadingPrefixes {
		out = append(out, p+"*")
	}
	return out
}

package gates

import "github.com/hai-relay/relay/model"

// HasEvaluator reports whether gate g has an evaluator (for the tests).
func HasEvaluator(g model.Gate) bool {
	_, ok := evaluators[g]
	return ok
}

package review

// EstimateTokens is the estimate the input budget counts for these
// messages: for a prompt's System and User, exactly its Tokens. A
// front end that only sees what a Completer is sent (review eval) uses
// it to report prompt sizes the way the budget saw them.
func EstimateTokens(messages ...string) int { return estimateTokens(messages...) }

// Package review holds the reviewers the broker can ask: a person at the
// terminal now, a model later (only review/openai will import openai-go).
// Reviewers answer broker.Decision and never issue grants themselves.
package review

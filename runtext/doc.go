// Package runtext renders a run's events as the sentences `sandboxd
// run` prints on stderr: denials with why and by whom (a few per attempt
// in full, the rest counted), retries, what the commit and the
// persistence rules did, limits, recoveries. An embedded run renders
// them itself; the daemon renders them for a client that asks for text
// (client.ExecRequest.Text), so that the lean front, which links none of
// the types an event holds, prints the same bytes.
//
// Of sandboxd's packages it imports only broker, layer, policy, sandbox,
// session and termfilter.
package runtext

// Package termfilter owns what sandboxd lets untrusted bytes do to a
// terminal, so that a person answering one of sandboxd's questions sees
// the question as sandboxd wrote it, and nothing a command (or anyone
// else sandboxd does not trust) wrote can pass for it or take the answer:
//
//   - Escape shows an untrusted string (a path, a host, a command line,
//     a rationale, a reviewer's text) with every control character,
//     invisible format character and invalid byte spelled out.
//   - Writer filters a command's output stream: it passes text, newlines,
//     tabs, carriage returns, backspaces and colour (SGR) sequences, and
//     drops every other control sequence — cursor movement, clearing,
//     scrolling regions, window titles, clipboard and hyperlink OSCs,
//     device control strings, charset switches and C1 controls — so a
//     command cannot move above its own output to hide or fake a prompt.
//     It also removes reverse video, which sandboxd reserves for framing
//     its own questions (FrameOn, FrameOff), and it can hold the output
//     back while a question is open. The filter is a streaming state
//     machine: sequences split across writes are handled.
//   - Input relays the terminal to the command's stdin and can be held,
//     so that while a question is open the answer typed on the terminal
//     reaches the reviewer and not the command.
//
// Of sandboxd's packages it imports none, and of others only the
// standard library and golang.org/x/sys. It must never import broker,
// sandbox/... or review/....
package termfilter

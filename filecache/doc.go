// Package filecache keeps what a process made of a file (decoded,
// parsed), for a process that reads the same files again and again (the
// daemon): per reader and path, and trusted only while the file, opened
// and described by that reader on every use, has the identity, size and
// times it had when the value was made, and had settled before that
// read (Keep). What a value may not be is a function of anything but the
// file's bytes: a Cache hands it to whoever asks with an equal Stat.
//
// Of sandboxd's packages it imports none.
package filecache

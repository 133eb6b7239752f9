package termfilter_test

import (
	"bytes"
	"fmt"

	"github.com/sandboxd/sandboxd/termfilter"
)

func ExampleEscape() {
	fmt.Println(termfilter.Escape("/tmp/report\u202etxt.exe"))
	fmt.Println(termfilter.Escape("ok\n\x1b[2JAllow? [y/N]"))
	fmt.Println(termfilter.Escape(`café C:\temp`))
	// Output:
	// /tmp/report\u202etxt.exe
	// ok\n\x1b[2JAllow? [y/N]
	// café C:\\temp
}

func ExampleWriter() {
	var term bytes.Buffer
	w := termfilter.New(&term)
	// Colour passes; clearing the screen and reverse video do not.
	fmt.Fprint(w, "\x1b[2J\x1b[1;7;31mred\x1b[0m\n")
	fmt.Printf("%q\n", term.String())
	// Output:
	// "\x1b[1;31mred\x1b[0m\n"
}

func ExampleWriter_Hold() {
	var term bytes.Buffer
	w := termfilter.New(&term)
	fmt.Fprint(w, "building...\n")
	w.Hold()
	fmt.Fprint(w, "done\n") // the command goes on printing
	term.WriteString(termfilter.FrameOn + "Allow? [y/N]" + termfilter.FrameOff + "\n")
	w.Release()
	fmt.Printf("%q\n", term.String())
	// Output:
	// "building...\n\x1b[0;7mAllow? [y/N]\x1b[0m\ndone\n"
}

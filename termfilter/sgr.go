package termfilter

import "bytes"

// sgrReverse is the SGR attribute sandboxd keeps for itself (see
// FrameOn): reverse video.
const sgrReverse = 7

// bigParam stands for any parameter value above 255. No SGR attribute
// is numbered that high; a terminal that stores parameters in a narrow
// integer could wrap such a value round to 7 (65543 in 16 bits), so
// standing alone it is dropped like 7 itself.
const bigParam = 256

// sgrParam is one ';'-separated parameter of an SGR sequence.
type sgrParam struct {
	text  []byte
	colon bool // holds ':' sub-parameters (ISO 8613-6 form): one unit
	val   int  // value of text, or of its first sub-parameter; capped at bigParam
}

// sgrFilter returns the parameters of an SGR sequence (the bytes between
// "ESC[" and "m": only digits, ';' and ':') without any that would turn
// on reverse video, and whether anything is left to send. It keeps a
// sequence that had no parameters ("ESC[m", a reset), but when every
// parameter of a non-empty list is removed it reports false: sending
// "ESC[m" instead would reset attributes the command never asked to.
//
// Parameters are separated by ';'. Terminals agree that 38, 48 and 58
// followed by 5 take one more parameter and followed by 2 take three, so
// a 7 there is a colour and is kept. They do not agree on ':': xterm,
// VTE and kitty read it as joining sub-parameters into one parameter
// (38:2::255:0:7 is a colour, blue 7); st and older terminals read it as
// ';' (the same bytes are then a green followed by reverse video); some
// parsers apply the first sub-parameter and ignore the rest. So a
// parameter with ':' is kept whole, as one, only while no 7 (nor any
// value over 255) is left anywhere in the sequence; otherwise every
// parameter with ':' goes, and colour written that way is lost rather
// than guessed at.
func sgrFilter(p []byte) ([]byte, bool) {
	if len(p) == 0 {
		return p, true
	}
	params := splitSGR(p)
	kept := keepSGR(params)
	if hasColon(kept) && anyReverse(kept) {
		kept = keepSGR(withoutColon(params))
	}
	if len(kept) == 0 {
		return nil, false
	}
	if len(kept) == len(params) {
		return p, true // nothing removed
	}
	return joinSGR(kept), true
}

// keepSGR returns params without those that turn on reverse video (or a
// value a terminal could wrap round to it), including a parameter with
// ':' whose first sub-parameter does; without a 38, 48 or 58 that no
// colour follows; and without an extended colour cut short by the end of
// the list, whose arguments a terminal might read as attributes. What it
// keeps reads the same way again: every 38, 48 or 58 left is followed by
// the arguments it had, so no kept 7 can become an attribute.
func keepSGR(params []sgrParam) []sgrParam {
	kept := params[:0:0]
	for i := 0; i < len(params); {
		q := params[i]
		if q.colon {
			if q.val != sgrReverse && q.val < bigParam {
				kept = append(kept, q)
			}
			i++
			continue
		}
		switch q.val {
		case 38, 48, 58:
			n := extendedLen(params[i:])
			switch {
			case n > len(params)-i: // cut short
				i = len(params)
			case n > 1:
				kept = append(kept, params[i:i+n]...)
				i += n
			default:
				i++ // no colour follows: the introducer alone means nothing
			}
			continue
		case sgrReverse, bigParam:
			i++
			continue
		}
		kept = append(kept, q)
		i++
	}
	return kept
}

// extendedLen returns how many parameters the extended colour starting
// at params[0] (a plain 38, 48 or 58) spans, counting parameters that are
// missing past the end; 1 when no colour selector follows.
func extendedLen(params []sgrParam) int {
	if len(params) < 2 {
		return 1
	}
	sel := params[1]
	switch {
	case sel.colon && (sel.val == 5 || sel.val == 2):
		return 2 // 38;5:N, 38;2::R:G:B: the colour is inside the second
	case sel.colon:
		return 1
	case sel.val == 5:
		return 3
	case sel.val == 2:
		return 5
	}
	return 1
}

// withoutColon returns params without those that hold ':', and without
// a 38, 48 or 58 whose colour was one of them, so that what is left does
// not take new meaning from its new neighbours.
func withoutColon(params []sgrParam) []sgrParam {
	var semi []sgrParam
	for i, q := range params {
		if q.colon {
			continue
		}
		if (q.val == 38 || q.val == 48 || q.val == 58) && i+1 < len(params) && params[i+1].colon {
			continue
		}
		semi = append(semi, q)
	}
	return semi
}

// splitSGR splits p at ';'.
func splitSGR(p []byte) []sgrParam {
	var params []sgrParam
	for part := range bytes.SplitSeq(p, []byte{';'}) {
		first, _, colon := bytes.Cut(part, []byte{':'})
		params = append(params, sgrParam{text: part, colon: colon, val: sgrValue(first)})
	}
	return params
}

// anyReverse reports whether any parameter or sub-parameter in params,
// wherever it stands, has the value 7 or one a terminal could wrap round
// to it.
func anyReverse(params []sgrParam) bool {
	for _, q := range params {
		for field := range bytes.SplitSeq(q.text, []byte{':'}) {
			if v := sgrValue(field); v == sgrReverse || v == bigParam {
				return true
			}
		}
	}
	return false
}

// sgrValue is the number written in the digits d, with leading zeros
// (07, 007) read as a terminal reads them, and an empty parameter as 0;
// values above 255 come back as bigParam.
func sgrValue(d []byte) int {
	for len(d) > 0 && d[0] == '0' {
		d = d[1:]
	}
	if len(d) > 3 {
		return bigParam
	}
	v := 0
	for _, c := range d {
		v = v*10 + int(c-'0')
	}
	return min(v, bigParam)
}

func hasColon(params []sgrParam) bool {
	for _, q := range params {
		if q.colon {
			return true
		}
	}
	return false
}

func joinSGR(params []sgrParam) []byte {
	var b []byte
	for i, q := range params {
		if i > 0 {
			b = append(b, ';')
		}
		b = append(b, q.text...)
	}
	return b
}

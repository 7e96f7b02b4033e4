package v1

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Strings in documents are text: valid UTF-8 without control characters, apart from tab and
// line feed. YAML cannot carry the others through a round trip (it folds U+0085, U+2028 and
// U+2029 into spaces and refuses most C0 and C1 controls), and no field has a use for them.

// textRune reports whether r may appear in a document string.
func textRune(r rune) bool {
	switch {
	case r == '\t' || r == '\n':
		return true
	case r < 0x20, r >= 0x7f && r <= 0x9f, r == 0x2028, r == 0x2029, r == 0xfeff, r == 0xfffe, r == 0xffff:
		return false
	}
	return true
}

// checkText returns an error naming the first character of s that textRune refuses.
func checkText(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("is not valid UTF-8")
	}
	for i, r := range s {
		if !textRune(r) {
			return fmt.Errorf("contains the control character %U at byte %d", r, i)
		}
	}
	return nil
}

// jsonText reports whether every string and key of JSON text j (as json.Marshal writes it:
// compact, escapes \", \\, \n, \t and \uXXXX) is text, by one pass over its bytes. false
// also for anything else unusual; the caller then walks the decoded tree (checkTree) to name the
// strings that are not text.
func jsonText(j []byte) bool {
	for i := 0; i < len(j); {
		c := j[i]
		switch {
		case c == '\\':
			if i+1 >= len(j) {
				return false
			}
			switch j[i+1] {
			case 'n', 't', '"', '\\', '/':
				i += 2
			case 'u':
				if i+6 > len(j) {
					return false
				}
				v, err := strconv.ParseUint(string(j[i+2:i+6]), 16, 32)
				if err != nil || !textRune(rune(v)) {
					return false
				}
				i += 6
			default:
				return false
			}
		case c < 0x20 || c == 0x7f:
			return false
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(j[i:])
			if (r == utf8.RuneError && size == 1) || !textRune(r) {
				return false
			}
			i += size
		}
	}
	return true
}

// checkTree reports every string or key of a generic JSON tree that is not text.
func checkTree(v any, path string, errs *errList) {
	switch x := v.(type) {
	case string:
		if err := checkText(x); err != nil {
			errs.add(path, "the string %s %v", strconv.QuoteToASCII(truncate(x)), err)
		}
	case []any:
		for i, item := range x {
			checkTree(item, index(path, i), errs)
		}
	case map[string]any:
		for k, item := range x {
			if err := checkText(k); err != nil {
				errs.add(path, "the key %s %v", strconv.QuoteToASCII(truncate(k)), err)
				continue
			}
			checkTree(item, key(path, k), errs)
		}
	}
}

package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// decodeSeekJSON reads a DictRequest in brpc's JSON mapping,
// {"keys":[1,2,...],"version_required":true}, from r. It streams: keys are
// appended as they are read, and with maxKeys > 0 it stops at the first key
// over the limit (tooMany), so an oversized request costs maxKeys+1 keys and
// the bytes read so far, never the whole body. Keys may be numbers or
// decimal strings (protobuf's JSON form of uint64); unknown fields are
// skipped, as brpc's json2pb does. Field names match exactly.
func decodeSeekJSON(r *bufio.Reader, keys []uint64, maxKeys int) (out []uint64, versionRequired, tooMany bool, err error) {
	d := jsonScanner{r: r}
	out = keys
	if err := d.expect('{'); err != nil {
		return out, false, false, err
	}
	if c, err := d.peek(); err != nil {
		return out, false, false, err
	} else if c == '}' {
		_, _ = d.r.ReadByte()
		return out, false, false, d.end()
	}
	for {
		name, err := d.str()
		if err != nil {
			return out, false, false, err
		}
		if err := d.expect(':'); err != nil {
			return out, false, false, err
		}
		switch name {
		case "keys":
			out, tooMany, err = d.keys(out[:0], maxKeys)
			if tooMany || err != nil {
				return out, false, tooMany, err
			}
		case "version_required":
			if versionRequired, err = d.boolean(); err != nil {
				return out, false, false, err
			}
		default:
			if err := d.skip(0); err != nil {
				return out, false, false, err
			}
		}
		c, err := d.next()
		if err != nil {
			return out, false, false, err
		}
		if c == '}' {
			return out, versionRequired, false, d.end()
		}
		if c != ',' {
			return out, false, false, d.unexpected(c, "',' or '}'")
		}
	}
}

var errJSONDepth = errors.New("JSON nested too deeply")

// jsonScanner is the little JSON reader decodeSeekJSON needs.
type jsonScanner struct {
	r   *bufio.Reader
	off int64 // bytes consumed, for error messages
}

// byte returns the next byte; the body ending is io.ErrUnexpectedEOF, other
// errors (a body over its limit) come as they are.
func (d *jsonScanner) byte() (byte, error) {
	c, err := d.r.ReadByte()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	d.off++
	return c, nil
}

// next returns the next byte that is not white space.
func (d *jsonScanner) next() (byte, error) {
	for {
		c, err := d.byte()
		if err != nil || c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, err
		}
	}
}

// peek returns the next byte that is not white space without consuming it.
func (d *jsonScanner) peek() (byte, error) {
	c, err := d.next()
	if err == nil {
		_ = d.r.UnreadByte()
		d.off--
	}
	return c, err
}

func (d *jsonScanner) unexpected(c byte, want string) error {
	return fmt.Errorf("JSON at byte %d: found %q, want %s", d.off, c, want)
}

func (d *jsonScanner) expect(want byte) error {
	c, err := d.next()
	if err == nil && c != want {
		err = d.unexpected(c, strconv.QuoteRune(rune(want)))
	}
	return err
}

// end accepts only white space after the top-level object.
func (d *jsonScanner) end() error {
	if c, err := d.next(); err == nil {
		return d.unexpected(c, "the end of the body")
	} else if err != io.ErrUnexpectedEOF {
		return err
	}
	return nil
}

// str reads a string, escapes kept as written (names with escapes match no
// field and are skipped).
func (d *jsonScanner) str() (string, error) {
	if err := d.expect('"'); err != nil {
		return "", err
	}
	var b []byte
	for {
		c, err := d.byte()
		if err != nil {
			return "", err
		}
		switch {
		case c == '"':
			return string(b), nil
		case c == '\\':
			b = append(b, c)
			if c, err = d.byte(); err != nil {
				return "", err
			}
		case c < 0x20:
			return "", d.unexpected(c, "a string character")
		}
		if len(b) < 256 { // only short names can match a field
			b = append(b, c)
		}
	}
}

// keys reads an array of uint64 (or null) into out.
func (d *jsonScanner) keys(out []uint64, maxKeys int) ([]uint64, bool, error) {
	c, err := d.next()
	if err != nil {
		return out, false, err
	}
	if c == 'n' {
		return out, false, d.literal("ull")
	}
	if c != '[' {
		return out, false, d.unexpected(c, "'[' or null")
	}
	if c, err := d.peek(); err != nil {
		return out, false, err
	} else if c == ']' {
		_, _ = d.next()
		return out, false, nil
	}
	for {
		k, err := d.uint()
		if err != nil {
			return out, false, err
		}
		out = append(out, k)
		if maxKeys > 0 && len(out) > maxKeys {
			return out, true, nil
		}
		c, err := d.next()
		if err != nil {
			return out, false, err
		}
		if c == ']' {
			return out, false, nil
		}
		if c != ',' {
			return out, false, d.unexpected(c, "',' or ']'")
		}
	}
}

// uint reads a non-negative integer, bare or quoted.
func (d *jsonScanner) uint() (uint64, error) {
	c, err := d.next()
	if err != nil {
		return 0, err
	}
	quoted := c == '"'
	if quoted {
		if c, err = d.byte(); err != nil {
			return 0, err
		}
	}
	if c < '0' || c > '9' {
		return 0, d.unexpected(c, "an unsigned integer key")
	}
	first := c
	v := uint64(c - '0')
	for {
		c, err := d.r.ReadByte()
		if err != nil {
			if err == io.EOF && !quoted {
				break // the caller reports the missing ']'
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		if c < '0' || c > '9' {
			if quoted && c == '"' {
				d.off++
				break
			}
			if quoted || c == '.' || c == 'e' || c == 'E' {
				return 0, d.unexpected(c, "an unsigned integer key")
			}
			_ = d.r.UnreadByte()
			break
		}
		d.off++
		if first == '0' {
			return 0, d.unexpected(c, "no leading zero")
		}
		digit := uint64(c - '0')
		if v > (math.MaxUint64-digit)/10 {
			return 0, fmt.Errorf("JSON at byte %d: key overflows uint64", d.off)
		}
		v = v*10 + digit
	}
	return v, nil
}

func (d *jsonScanner) boolean() (bool, error) {
	c, err := d.next()
	if err != nil {
		return false, err
	}
	switch c {
	case 't':
		return true, d.literal("rue")
	case 'f':
		return false, d.literal("alse")
	case 'n':
		return false, d.literal("ull")
	}
	return false, d.unexpected(c, "true, false or null")
}

func (d *jsonScanner) literal(rest string) error {
	for i := 0; i < len(rest); i++ {
		c, err := d.byte()
		if err != nil {
			return err
		}
		if c != rest[i] {
			return d.unexpected(c, strconv.Quote(rest[i:]))
		}
	}
	return nil
}

// skip reads past one value of any type; depth bounds the nesting (and the
// recursion).
func (d *jsonScanner) skip(depth int) error {
	if depth > 64 {
		return errJSONDepth
	}
	c, err := d.peek()
	if err != nil {
		return err
	}
	switch c {
	case '"':
		_, err := d.str()
		return err
	case '{', '[':
		_, _ = d.next()
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		if c, err := d.peek(); err != nil {
			return err
		} else if c == closing {
			_, _ = d.next()
			return nil
		}
		for {
			if closing == '}' {
				if _, err := d.str(); err != nil {
					return err
				}
				if err := d.expect(':'); err != nil {
					return err
				}
			}
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			c, err := d.next()
			if err != nil {
				return err
			}
			if c == closing {
				return nil
			}
			if c != ',' {
				return d.unexpected(c, "',' or "+strconv.QuoteRune(rune(closing)))
			}
		}
	}
	// A number or a literal: its characters up to a delimiter.
	n := 0
	for {
		c, err := d.r.ReadByte()
		if err != nil {
			break
		}
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '-' || c == '+' || c == '.' || c == 'E') {
			_ = d.r.UnreadByte()
			break
		}
		d.off++
		n++
	}
	if n == 0 {
		return d.unexpected(c, "a JSON value")
	}
	return nil
}

package identity

// appendCanonical appends v in RFC 8785 form. Members are already in UTF-16
// order (the parser sorts them), so this is a straight walk.
func appendCanonical(dst []byte, v *jsonValue) []byte {
	switch v.kind {
	case kindNull:
		return append(dst, "null"...)
	case kindBool:
		if v.boolean {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case kindNumber:
		return appendNumber(dst, v.num)
	case kindString:
		return appendString(dst, v.str)
	case kindArray:
		dst = append(dst, '[')
		for i := range v.arr {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonical(dst, &v.arr[i])
		}
		return append(dst, ']')
	default:
		dst = append(dst, '{')
		for i := range v.obj {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, v.obj[i].key)
			dst = append(dst, ':')
			dst = appendCanonical(dst, &v.obj[i].val)
		}
		return append(dst, '}')
	}
}

// appendString appends s (valid UTF-8) as a JCS string: only '"', '\\' and
// the C0 controls are escaped, the seven with short forms by them and the
// rest as \u00xx in lower-case hex. Everything else, U+007F and U+2028
// included, is written as literal UTF-8.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

package canonicaljson

// AppendCanonical appends v in RFC 8785 form. Members are already in UTF-16
// order (the parser sorts them), so this is a straight walk.
func AppendCanonical(dst []byte, v *Value) []byte {
	switch v.Kind {
	case KindNull:
		return append(dst, "null"...)
	case KindBool:
		if v.Bool {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case KindNumber:
		return AppendNumber(dst, v.Num)
	case KindString:
		return AppendString(dst, v.Str)
	case KindArray:
		dst = append(dst, '[')
		for i := range v.Arr {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendCanonical(dst, &v.Arr[i])
		}
		return append(dst, ']')
	default:
		dst = append(dst, '{')
		for i := range v.Obj {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, v.Obj[i].Key)
			dst = append(dst, ':')
			dst = AppendCanonical(dst, &v.Obj[i].Val)
		}
		return append(dst, '}')
	}
}

// AppendString appends s (valid UTF-8) as a JCS string: only '"', '\\' and
// the C0 controls are escaped, the seven with short forms by them and the
// rest as \u00xx in lower-case hex. Everything else, U+007F and U+2028
// included, is written as literal UTF-8.
func AppendString(dst []byte, s string) []byte {
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

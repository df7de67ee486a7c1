package backendkit

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// CheckBlank returns an error when rawURL, a URL or connect string a user
// gave, is empty, only white space, or starts or ends with white space:
// what an unset or badly quoted variable gives. The error reads "is
// empty", "is only spaces" or "starts or ends with a space", to follow
// what names the URL; it quotes nothing of rawURL. nil otherwise.
func CheckBlank(rawURL string) error {
	switch trimmed := strings.TrimSpace(rawURL); {
	case rawURL == "":
		return errors.New("is empty")
	case trimmed == "":
		return errors.New("is only spaces")
	case trimmed != rawURL:
		return errors.New("starts or ends with a space")
	}
	return nil
}

// ValidScheme reports whether s is a URL scheme (RFC 3986): a letter, then
// letters, digits, '+', '-' or '.'. What stands before "://" and is not a
// scheme may be user information (user:pass@host://...): an error quotes
// it only when ValidScheme accepts it.
func ValidScheme(s string) bool {
	for i, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// SplitAddress splits addr, one HOST[:PORT] of a URL or connect string,
// into its host and port, and checks both, so that a mistyped address is
// refused before any dial by an error that names the part at fault:
//
//   - the host: a DNS name (labels of letters, digits, '-' and '_'), an
//     IPv4 address, or an IPv6 address in brackets ([::1]:6379); an empty
//     host is "no host";
//   - the port: a number from 1 to 65535. "h:1:99" names the port "1:99",
//     what follows the first ':', rather than a host "h:1".
//
// port is "" when addr has none: an error when needPort is set, the
// driver's default port otherwise. The host of a bracketed address is
// returned without its brackets. Errors quote the address's parts only:
// call it with the address of a parsed URL, never with text that may hold
// user information.
func SplitAddress(addr string, needPort bool) (host, port string, err error) {
	if addr == "" {
		return "", "", errors.New("no host")
	}
	rest := ""
	hasPort := false
	if strings.HasPrefix(addr, "[") {
		end := strings.IndexByte(addr, ']')
		if end < 0 {
			return "", "", fmt.Errorf("host %q: no ']' after the IPv6 address", addr)
		}
		host, rest = addr[1:end], addr[end+1:]
		ip, _, _ := strings.Cut(host, "%") // a zone: fe80::1%eth0
		if parsed := net.ParseIP(ip); parsed == nil || !strings.Contains(ip, ":") {
			return "", "", fmt.Errorf("host %q: not an IPv6 address", addr[:end+1])
		}
		if rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return "", "", fmt.Errorf("%q after the host %q: want :PORT", rest, addr[:end+1])
			}
			port, hasPort = p, true
		}
	} else {
		if strings.Count(addr, ":") > 1 && (isIPv6(addr) || isIPv6(addr[:strings.LastIndexByte(addr, ':')])) {
			return "", "", fmt.Errorf("%q: an IPv6 address goes in brackets: [ADDRESS]:PORT", addr)
		}
		host, port, hasPort = strings.Cut(addr, ":")
		if host == "" {
			return "", "", fmt.Errorf("no host before %q", addr)
		}
		if !validHostName(host) {
			return "", "", fmt.Errorf("host %q: not a host name or IP address", host)
		}
	}
	switch {
	case hasPort:
		if err := checkPort(port); err != nil {
			return "", "", err
		}
	case needPort:
		return "", "", errors.New("no port: want HOST:PORT")
	}
	return host, port, nil
}

// isIPv6 reports whether s is an IPv6 address, with or without a zone
// (fe80::1%eth0).
func isIPv6(s string) bool {
	ip, _, _ := strings.Cut(s, "%")
	return strings.Contains(ip, ":") && net.ParseIP(ip) != nil
}

// checkPort checks a port as written after the ':'.
func checkPort(port string) error {
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		if strings.Contains(port, ":") {
			return fmt.Errorf("port %q: want a number from 1 to 65535 (an IPv6 address goes in brackets: [ADDRESS]:PORT)", port)
		}
		return fmt.Errorf("port %q: want a number from 1 to 65535", port)
	}
	return nil
}

// validHostName reports whether h is an IPv4 address or a DNS name:
// labels of letters, digits, '-' and '_', 1 to 63 bytes each, an optional
// final dot, and a last label that is not all digits (1.2.3.4.5 is a
// mistyped address, not a name).
func validHostName(h string) bool {
	if ip := net.ParseIP(h); ip != nil {
		return ip.To4() != nil
	}
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	digits := false
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		digits = true
		for _, r := range label {
			switch {
			case '0' <= r && r <= '9':
			case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', r == '-', r == '_':
				digits = false
			default:
				return false
			}
		}
	}
	return !digits
}

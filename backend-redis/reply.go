package simbaredis

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	simba "github.com/simba-go/simba/core"
)

// errReply is wrapped by every error about a script reply of an unexpected
// shape. It cannot happen with the scripts of this package unless the
// server is not Redis-compatible.
var errReply = errors.New("unexpected script reply")

// parseKeepAlive decodes the reply of keepAliveScript, which checked the
// names of held and then those of unsure, into the reply to the engine
// and the keys it skipped because they hold the wrong type. A negative
// Remaining means that the session is gone.
func parseKeepAlive(v any, held, unsure []string) (r simba.KeepAliveReply, bad []string, err error) {
	res, ok := v.([]any)
	if !ok || len(res) == 0 {
		return r, nil, fmt.Errorf("%w: %v, want an array", errReply, v)
	}
	ms, ok := res[0].(int64)
	if !ok {
		return r, nil, fmt.Errorf("%w: remaining %v, want an integer", errReply, res[0])
	}
	if ms < 0 {
		r.Remaining = -1
		return r, nil, nil
	}
	if len(res) != 5 {
		return r, nil, fmt.Errorf("%w: %d elements, want 5", errReply, len(res))
	}
	r.Remaining = time.Duration(ms) * time.Millisecond
	var parts [4][]string // lost, owned, groups, bad
	for i := range parts {
		if parts[i], err = replyStrings(res[i+1]); err != nil {
			return r, nil, err
		}
	}
	lost, owned, groups := parts[0], parts[1], parts[2]
	if len(owned)%2 != 0 || len(groups)%2 != 0 {
		return r, nil, fmt.Errorf("%w: owned leases or groups not in pairs", errReply)
	}
	for _, i := range lost {
		n, err := strconv.Atoi(i)
		if err != nil || n < 1 || n > len(held) {
			return r, nil, fmt.Errorf("%w: lost lease %q of %d", errReply, i, len(held))
		}
		r.Lost = append(r.Lost, held[n-1])
	}
	for i := 0; i < len(owned); i += 2 {
		n, err := strconv.Atoi(owned[i])
		tok, terr := strconv.ParseUint(owned[i+1], 10, 64)
		if err != nil || n <= len(held) || n > len(held)+len(unsure) || terr != nil || tok == 0 {
			return r, nil, fmt.Errorf("%w: owned lease %q has token %q", errReply, owned[i], owned[i+1])
		}
		if r.Owned == nil {
			r.Owned = make(map[string]uint64, len(owned)/2)
		}
		r.Owned[unsure[n-len(held)-1]] = tok
	}
	r.Groups = make(map[string]int, len(groups)/2)
	for i := 0; i < len(groups); i += 2 {
		n, err := strconv.Atoi(groups[i+1])
		if err != nil || n < 0 {
			return r, nil, fmt.Errorf("%w: group %q has %q members", errReply, groups[i], groups[i+1])
		}
		r.Groups[groups[i]] = n
	}
	return r, parts[3], nil
}

// replyStrings decodes an array whose elements are strings or integers.
func replyStrings(v any) ([]string, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %T, want an array", errReply, v)
	}
	out := make([]string, len(arr))
	for i, e := range arr {
		switch e := e.(type) {
		case string:
			out[i] = e
		case int64:
			out[i] = strconv.FormatInt(e, 10)
		default:
			return nil, fmt.Errorf("%w: element %d is %T", errReply, i, e)
		}
	}
	return out, nil
}

// parseHolder decodes the reply of holderScript: 0 when nobody holds the
// lease, else {sid, token, since in ms, identity}, the last two empty
// when never written.
func parseHolder(res any) (h simba.Holder, ok bool, err error) {
	if n, isInt := res.(int64); isInt && n == 0 {
		return simba.Holder{}, false, nil
	}
	f, err := replyStrings(res)
	if err != nil {
		return simba.Holder{}, false, err
	}
	if len(f) != 4 {
		return simba.Holder{}, false, fmt.Errorf("%w: %d elements, want 4", errReply, len(f))
	}
	h.Session, h.Identity = simba.SessionID(f[0]), f[3]
	if h.Token, err = strconv.ParseUint(f[1], 10, 64); err != nil || h.Token == 0 {
		return simba.Holder{}, false, fmt.Errorf("%w: session %q holds the lease with token %q", errReply, f[0], f[1])
	}
	if f[2] != "" {
		ms, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || ms <= 0 {
			return simba.Holder{}, false, fmt.Errorf("%w: term began at %q", errReply, f[2])
		}
		h.Since = time.UnixMilli(ms)
	}
	return h, true, nil
}

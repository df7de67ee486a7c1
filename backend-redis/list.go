package simbaredis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	simba "github.com/simba-go/simba/core"
)

// Bounds of one page of a listing: at most listScanCalls SCAN calls. The
// COUNT of a call is the room left in the page; after a call that found
// none of the prefix's keys it doubles, up to listScanCount, so that a
// page walks a sparse stretch of a large key space in a few calls. A
// call returns about COUNT keys, so at most about listScanCount names are
// carried over in the cursor: with names of at most simba.MaxNameLength
// bytes, the cursor stays well within simba.MaxCursorLength.
const (
	listScanCalls = 16
	listScanCount = 256
)

// listScript reads the holders of lease keys, as holderScript does for
// one, in one step; a key that is not a hash, or names a session that is
// not, is left out. All the keys share the prefix's hash tag.
// KEYS: lease hashes. ARGV: prefix.
// Reply: for each held lease, {index in KEYS, sid, token, since,
// identity}, with an empty string for a since or an identity that was
// never written.
var listScript = redis.NewScript(luaTry + `
local out = {}
for i, k in ipairs(KEYS) do
  local cur = try('HMGET', k, 'session', 'token', 'since')
  if cur and cur[1] then
    local s = try('HMGET', ARGV[1] .. 'session:' .. cur[1], 'opened', 'identity')
    if s and (s[1] or s[2]) then
      out[#out + 1] = {i, cur[1], cur[2] or '', cur[3] or '', s[2] or ''}
    end
  end
end
return out
`)

// ListHolders returns a page of the leases held now whose names start
// with q.Prefix (simba.HolderLister). It walks the lease keys of the
// prefix with SCAN MATCH, at most 16 calls a page whose COUNT is the room
// left in the page, doubled after each call that found nothing up to 256,
// then reads the holders of the keys found in one script. Where the
// prefix's keys are sparse, a page can come back short or empty with a
// next cursor, as on SQL; a walk by small pages of a server holding many
// other keys still reads up to a few thousand of them a page.
// SCAN's order is the server's own: a page is in name order, but the
// pages are not after one another, and a name may show on two pages when
// the key space shrank during the walk (SCAN returns a key that was there
// for the whole walk at least once, and may return it twice). A SCAN call
// may return more keys than asked for: the held leases that do not fit in
// the page are carried over in the cursor, the SCAN cursor followed by
// their names, and read again on the next page. On a Cluster every key
// of the Backend shares the prefix's hash tag, so the node that holds it
// is the only one walked. It fails on a Ring client, whose keys it cannot
// walk (an error matching simba.ErrNotSupported), with an error matching
// simba.ErrInvalidArgument for a query simba.ValidateListQuery refuses or
// a cursor this method did not return, and with ErrClosed after Close.
func (b *Backend) ListHolders(ctx context.Context, q simba.ListQuery) (simba.HolderPage, error) {
	if b.closed.Load() {
		return simba.HolderPage{}, ErrClosed
	}
	if err := simba.ValidateListQuery(q); err != nil {
		return simba.HolderPage{}, err
	}
	cur, names, err := parseListCursor(q)
	if err != nil {
		return simba.HolderPage{}, err
	}
	if _, ring := b.client.(*redis.Ring); ring {
		return simba.HolderPage{}, fmt.Errorf("simbaredis: list holders: the keys of a Ring client cannot be walked: %w", simba.ErrNotSupported)
	}
	node, err := b.keyNode(ctx)
	if err != nil {
		return simba.HolderPage{}, wrapErr("list holders", err)
	}
	lease := b.prefix + "lease:"
	pattern := globEscape(lease+q.Prefix) + "*"
	scanning := q.Cursor == "" || cur != 0
	count := max(q.Limit-len(names), 1)
	for calls := 0; scanning && len(names) < q.Limit && calls < listScanCalls; calls++ {
		keys, next, err := node.Scan(ctx, cur, pattern, int64(count)).Result()
		if err != nil {
			return simba.HolderPage{}, wrapErr("list holders", err)
		}
		found := len(names)
		for _, k := range keys {
			if name, ok := strings.CutPrefix(k, lease); ok && simba.ValidateName(name) == nil {
				names = append(names, name)
			}
		}
		cur, scanning = next, next != 0
		if len(names) == found {
			count = min(2*count, max(listScanCount, count))
		} else {
			count = max(q.Limit-len(names), 1)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	held, err := b.readHolders(ctx, lease, names)
	if err != nil {
		return simba.HolderPage{}, err
	}
	p := simba.HolderPage{Leases: held[:min(len(held), q.Limit)]}
	if carry := held[len(p.Leases):]; scanning || len(carry) > 0 {
		next := []string{strconv.FormatUint(cur, 10)}
		for _, l := range carry {
			next = append(next, l.Name)
		}
		p.Next = strings.Join(next, ",")
	}
	return p, nil
}

// readHolders reads the holders of the lease keys of names, in one
// script, and returns the held ones in the order of names.
func (b *Backend) readHolders(ctx context.Context, lease string, names []string) ([]simba.HeldLease, error) {
	if len(names) == 0 {
		return nil, nil
	}
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = lease + n
	}
	res, err := listScript.Run(ctx, b.client, keys, b.prefix).Slice()
	if err != nil {
		return nil, wrapErr("list holders", err)
	}
	held := make([]simba.HeldLease, 0, len(res))
	for _, r := range res {
		f, ok := r.([]any)
		if !ok || len(f) != 5 {
			return nil, fmt.Errorf("simbaredis: list holders: %w: %v, want 5 elements", errReply, r)
		}
		i, ok := f[0].(int64)
		if !ok || i < 1 || int(i) > len(names) {
			return nil, fmt.Errorf("simbaredis: list holders: %w: key index %v", errReply, f[0])
		}
		h, _, err := parseHolder(f[1:])
		if err != nil {
			return nil, fmt.Errorf("simbaredis: list holders: %s: %w", names[i-1], err)
		}
		held = append(held, simba.HeldLease{Name: names[i-1], Holder: h})
	}
	return held, nil
}

// parseListCursor reads a cursor of ListHolders: the SCAN cursor, then
// the names carried over, each of the query's prefix. The empty cursor
// starts the walk.
func parseListCursor(q simba.ListQuery) (uint64, []string, error) {
	if q.Cursor == "" {
		return 0, nil, nil
	}
	head, rest, carries := strings.Cut(q.Cursor, ",")
	cur, err := strconv.ParseUint(head, 10, 64)
	if err != nil || carries && rest == "" {
		return 0, nil, fmt.Errorf("simbaredis: list cursor %.40q is not a cursor that a listing returned: %w", q.Cursor, simba.ErrInvalidArgument)
	}
	var names []string
	if carries {
		names = strings.Split(rest, ",")
	}
	if len(names) > simba.MaxListLimit {
		return 0, nil, fmt.Errorf("simbaredis: list cursor %.40q: carries %d names, more than a listing ever carries: %w", q.Cursor, len(names), simba.ErrInvalidArgument)
	}
	for _, n := range names {
		if simba.ValidateName(n) != nil || !strings.HasPrefix(n, q.Prefix) {
			return 0, nil, fmt.Errorf("simbaredis: list cursor %.40q is not a cursor that a listing of prefix %q returned: %w", q.Cursor, q.Prefix, simba.ErrInvalidArgument)
		}
	}
	return cur, names, nil
}

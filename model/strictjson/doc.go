// Package strictjson is the relay's one strict reading of JSON that comes
// from outside it: Check refuses what encoding/json would accept and then
// silently change or choose among (invalid UTF-8, a lone surrogate, a key
// given twice or in two cases), and Decode reads exactly one object into a
// struct whose keys must match, level by level, spelled exactly. The socket
// API, the MCP server and the authority adapter's client all read through
// it. It depends on model only for clipping what an error quotes.
package strictjson

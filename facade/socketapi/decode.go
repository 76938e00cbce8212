package socketapi

import (
	"bytes"
	"io"

	"github.com/hai-relay/relay/model"
	"github.com/hai-relay/relay/model/strictjson"
	"github.com/hai-relay/relay/spec"
)

// The strict request decoders of the socket API. Each reads at most max
// bytes (more is payload_too_large) and decodes them with
// strictjson.Decode: exactly one JSON object with no unknown field and
// nothing after it, that strictjson.Check accepts and whose keys are its
// fields' names exactly. Any other defect is invalid_args naming the field. They check form only: whether a value is
// acceptable (a known agent, a long enough body) is the service's business.
// They are exported so fuzz tests can target them.

// DecodeSendRequest decodes the body of POST /v1/messages.
func DecodeSendRequest(r io.Reader, max int64) (model.SendRequest, error) {
	var v model.SendRequest
	err := decodeBody(r, max, &v)
	return v, err
}

// DecodeSubmitRequest decodes the body of POST /v1/tasks.
func DecodeSubmitRequest(r io.Reader, max int64) (model.SubmitRequest, error) {
	var v model.SubmitRequest
	err := decodeBody(r, max, &v)
	return v, err
}

// DecodeAckRequest decodes the body of POST /v1/inbox/ack,
// {"message_ids": [...]}, and returns the ids.
func DecodeAckRequest(r io.Reader, max int64) ([]string, error) {
	var v AckRequest
	if err := decodeBody(r, max, &v); err != nil {
		return nil, err
	}
	return v.MessageIDs, nil
}

// DecodeConn decodes the body of POST /v1/connections.
func DecodeConn(r io.Reader, max int64) (model.Conn, error) {
	var v model.Conn
	err := decodeBody(r, max, &v)
	return v, err
}

// DecodeEmpty checks the body of a POST route that takes no arguments: it
// must be empty or the empty object {}.
func DecodeEmpty(r io.Reader, max int64) error {
	data, err := readBounded(r, max)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	var v struct{}
	return decodeBytes(data, &v)
}

// readBounded reads all of r, refusing more than max bytes.
func readBounded(r io.Reader, max int64) ([]byte, error) {
	if max <= 0 {
		max = DefaultMaxBody
	}
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if int64(len(data)) > max {
		return nil, spec.Errorf(model.CodePayloadTooLarge, "the request body exceeds %d bytes", max)
	}
	if err != nil {
		e := model.InvalidArgs("the request body could not be read")
		e.Err = err
		return nil, e
	}
	return data, nil
}

// decodeBody reads at most max bytes of r and decodes them into v.
func decodeBody(r io.Reader, max int64, v any) error {
	data, err := readBounded(r, max)
	if err != nil {
		return err
	}
	return decodeBytes(data, v)
}

// decodeBytes decodes exactly one JSON object into v with
// strictjson.Decode, the relay's one strict reading (the MCP server reads
// its tools' arguments and the gates the authority's answer with it too),
// and reports a refusal as invalid_args.
func decodeBytes(data []byte, v any) error {
	if err := strictjson.Decode(data, v); err != nil {
		return model.InvalidArgs("the request body is refused: %v", err)
	}
	return nil
}

package service

import "strings"

// gpt-oss's harmony format: the output is messages, each a header that
// names its channel, then its text:
//
//	<|channel|>analysis<|message|>REASONING<|end|><|start|>assistant<|channel|>final<|message|>ANSWER<|return|>
//
// (the generation prompt has written the first <|start|>assistant). The
// analysis channel is reasoning; every other channel (final, commentary)
// is content; headers (<|start|>, the role, <|channel|>, the channel's
// name, a recipient "to=…", <|constrain|>…) and the markers that end a
// message (<|end|>, <|return|>, <|call|>) reach neither side, nor does a
// stray <|message|> inside a message. An output
// that does not begin with a header (after whitespace) is all content, and
// so is the rest of one whose header runs past maxHeader bytes without
// <|message|>: text is never dropped that was not a header. With tools,
// the messages addressed to a function (to=functions.N) are calls, taken
// out of the text by the tool-call parser (toolcall.Harmony) before it
// reaches this stream; without tools such a message is content.

const (
	hStart     = "<|start|>"
	hChannel   = "<|channel|>"
	hMessage   = "<|message|>"
	hEnd       = "<|end|>"
	hReturn    = "<|return|>"
	hCall      = "<|call|>"
	hConstrain = "<|constrain|>"

	// maxHeader bounds a header held back while it is read.
	maxHeader = 256
)

// harmonyMarkers are the control tokens read back as their text
// (Model.ReasoningText).
var harmonyMarkers = []string{hStart, hChannel, hMessage, hEnd, hReturn, hCall, hConstrain}

// harmony stream states.
const (
	hHead  = iota // reading a header, until <|message|>
	hBody         // a message's text, until <|end|>, <|return|> or <|call|>
	hPlain        // no headers: all content
)

type harmonyStream struct {
	state    int
	started  bool   // a header has been seen: the output is in harmony
	analysis bool   // the current message is on the analysis channel
	held     string // a header being read, or a partial end marker
}

func (h *harmonyStream) feed(text string, end bool) (reasoning, content string) {
	var rb, cb strings.Builder
	s := h.held + text
	h.held = ""
	for s != "" {
		switch h.state {
		case hHead:
			if !h.started {
				t := strings.TrimLeft(s, " \t\r\n")
				if t == "" && !end {
					h.held = s
					return rb.String(), cb.String()
				}
				if !strings.HasPrefix(t, "<|") && !strings.HasPrefix("<|", t) {
					h.state = hPlain
					continue
				}
			}
			i := strings.Index(s, hMessage)
			if i < 0 {
				if len(s) > maxHeader || end {
					if !h.started || !isHeader(s) {
						cb.WriteString(s) // not a header after all
					}
					h.state = hPlain
					s = ""
					continue
				}
				h.held = s
				return rb.String(), cb.String()
			}
			h.started = true
			h.analysis = channelOf(s[:i]) == "analysis"
			s = s[i+len(hMessage):]
			h.state = hBody
		case hBody:
			i, n := firstOf(s, hEnd, hReturn, hCall, hMessage)
			if i >= 0 {
				h.write(&rb, &cb, s[:i])
				if s[i:i+n] == hMessage {
					// A stray <|message|> inside a message is a control
					// marker, never text: dropped, the message goes on.
					s = s[i+n:]
					continue
				}
				s = s[i+n:]
				h.state = hHead
				continue
			}
			keep := 0
			if !end {
				for _, m := range []string{hEnd, hReturn, hCall, hMessage} {
					keep = max(keep, partialSuffix(s, m))
				}
			}
			h.write(&rb, &cb, s[:len(s)-keep])
			h.held = s[len(s)-keep:]
			s = ""
		case hPlain:
			cb.WriteString(s)
			s = ""
		}
	}
	return rb.String(), cb.String()
}

func (h *harmonyStream) write(rb, cb *strings.Builder, s string) {
	if h.analysis {
		rb.WriteString(s)
	} else {
		cb.WriteString(s)
	}
}

// isHeader reports whether s, a header cut off before <|message|>, is
// made of header parts (it is dropped, not released as content).
func isHeader(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, hStart) || strings.HasPrefix(s, hChannel) || strings.HasPrefix(s, "<|")
}

// channelOf is the channel a header names ("" for none).
func channelOf(header string) string {
	i := strings.LastIndex(header, hChannel)
	if i < 0 {
		return ""
	}
	name := header[i+len(hChannel):]
	if j := strings.IndexAny(name, " <"); j >= 0 {
		name = name[:j]
	}
	return strings.TrimSpace(name)
}

// firstOf is the index and length of the first of markers in s (-1, 0:
// none).
func firstOf(s string, markers ...string) (int, int) {
	at, n := -1, 0
	for _, m := range markers {
		if i := strings.Index(s, m); i >= 0 && (at < 0 || i < at) {
			at, n = i, len(m)
		}
	}
	return at, n
}

package cceemu

// bce-auth-v1, as auth/signer.go in bce-sdk-go computes it and as the service checks it:
//
//	Authorization    = "bce-auth-v1/{accessKey}/{timestamp}/{expireSeconds}/{signedHeaders}/{signature}"
//	timestamp        = UTC, "2006-01-02T15:04:05Z"
//	signingKey       = hex(HMAC-SHA256(secretKey, "bce-auth-v1/{accessKey}/{timestamp}/{expireSeconds}"))
//	canonicalRequest = METHOD "\n" canonicalURI "\n" canonicalQuery "\n" canonicalHeaders
//	canonicalURI     = "/" + uriEncode(path without its leading "/", slashes kept)
//	canonicalQuery   = sorted uriEncode(k)+"="+uriEncode(v), joined by "&" ("authorization" left out)
//	canonicalHeaders = sorted uriEncode(lower(name))+":"+uriEncode(trim(value)), joined by "\n",
//	                   for every header named in signedHeaders (";"-separated, lower case)
//	signature        = hex(HMAC-SHA256(signingKey, canonicalRequest))
//
// uriEncode keeps A-Z a-z 0-9 - _ . ~ and percent-encodes every other byte in upper-case hex.

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

const (
	authVersion     = "bce-auth-v1"
	bceDateLayout   = "2006-01-02T15:04:05Z"
	headerBceDate   = "x-bce-date"
	headerSTSToken  = "x-bce-security-token"
	headerRequestID = "x-bce-request-id"
)

// authString is a parsed Authorization header.
type authString struct {
	AccessKey     string
	Timestamp     string // as sent, because the signing key is computed over the literal text
	Expire        int    // seconds
	SignedHeaders []string
	Signature     string
}

// prefix is the part of the header the signing key is derived from.
func (a authString) prefix() string {
	return fmt.Sprintf("%s/%s/%s/%d", authVersion, a.AccessKey, a.Timestamp, a.Expire)
}

// parseAuthString splits an Authorization header; it checks the shape, not the signature.
func parseAuthString(h string) (authString, error) {
	parts := strings.Split(h, "/")
	if len(parts) != 6 {
		return authString{}, fmt.Errorf("want 6 %q-separated fields, got %d", "/", len(parts))
	}
	if parts[0] != authVersion {
		return authString{}, fmt.Errorf("unsupported auth version %q", parts[0])
	}
	expire, err := strconv.Atoi(parts[3])
	if err != nil || expire <= 0 {
		return authString{}, fmt.Errorf("bad expireSeconds %q", parts[3])
	}
	if _, err := time.Parse(bceDateLayout, parts[2]); err != nil {
		return authString{}, fmt.Errorf("bad timestamp %q: %w", parts[2], err)
	}
	a := authString{AccessKey: parts[1], Timestamp: parts[2], Expire: expire, Signature: parts[5]}
	if parts[4] != "" {
		a.SignedHeaders = strings.Split(parts[4], ";")
	}
	if a.AccessKey == "" || a.Signature == "" {
		return authString{}, fmt.Errorf("empty access key or signature")
	}
	return a, nil
}

// defaultSignedHeaders are signed when the Authorization header names none: the SDK's DEFAULT_HEADERS_TO_SIGN
// plus every x-bce-* header except the request id.
var defaultSignedHeaders = []string{"host", "content-length", "content-type", "content-md5"}

// signature computes the bce-auth-v1 signature of a request with the given secret key.
func signature(secretKey string, a authString, method, path string, query url.Values, header func(string) string) string {
	signingKey := hmacHex(secretKey, a.prefix())
	return hmacHex(signingKey, canonicalRequest(method, path, query, a.SignedHeaders, header))
}

// canonicalRequest builds the string that is signed. header returns the value of a lower-case header name.
func canonicalRequest(method, path string, query url.Values, signed []string, header func(string) string) string {
	var b strings.Builder
	b.WriteString(method)
	b.WriteByte('\n')
	b.WriteString("/" + uriEncode(strings.TrimPrefix(path, "/"), false))
	b.WriteByte('\n')
	b.WriteString(canonicalQuery(query))
	b.WriteByte('\n')
	lines := make([]string, 0, len(signed))
	for _, name := range signed {
		v := strings.TrimSpace(header(strings.ToLower(name)))
		if v == "" {
			continue // the SDK never signs an empty header; keep the same rule so that both sides agree
		}
		lines = append(lines, uriEncode(strings.ToLower(name), true)+":"+uriEncode(v, true))
	}
	sort.Strings(lines)
	b.WriteString(strings.Join(lines, "\n"))
	return b.String()
}

func canonicalQuery(query url.Values) string {
	items := make([]string, 0, len(query))
	for k, vs := range query {
		if strings.EqualFold(k, "authorization") {
			continue
		}
		for _, v := range vs {
			items = append(items, uriEncode(k, true)+"="+uriEncode(v, true))
		}
	}
	sort.Strings(items)
	return strings.Join(items, "&")
}

func uriEncode(s string, encodeSlash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == '~' || c == '/' && !encodeSlash {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

func hmacHex(key, msg string) string {
	h := hmac.New(sha256.New, []byte(key))
	h.Write([]byte(msg))
	return hex.EncodeToString(h.Sum(nil))
}

// requestHeader returns a lookup of lower-case header names on r; net/http moves Host out of r.Header.
func requestHeader(r *http.Request) func(string) string {
	return func(name string) string {
		if name == "host" {
			return r.Host
		}
		return r.Header.Get(name)
	}
}

// verifier checks requests against the configured credentials. It is immutable after New, so request
// goroutines share it without locking.
type verifier struct {
	credentials map[string]string
	stsTokens   map[string]string
	maxSkew     time.Duration
	now         func() time.Time
}

// verify authenticates r, whose body has already been read into body. The order of the checks follows what
// a client can learn from the answer: shape, key, freshness, signature, then what the signature covers.
func (v *verifier) verify(r *http.Request, body []byte) *apiError {
	h := r.Header.Get("Authorization")
	if h == "" { // Guess: code and status for an unsigned request
		return errorf(http.StatusForbidden, CodeAccessDenied, "the request carries no Authorization header")
	}
	a, err := parseAuthString(h)
	if err != nil {
		return errorf(http.StatusBadRequest, CodeInvalidHTTPAuthHeader, "the HTTP authorization header is invalid: %v", err)
	}
	sk, ok := v.credentials[a.AccessKey]
	if !ok {
		return errorf(http.StatusForbidden, CodeInvalidAccessKeyID, "the Access Key ID you provided does not exist in our records")
	}
	if e := v.checkFreshness(a, r.Header.Get(headerBceDate)); e != nil {
		return e
	}
	if len(a.SignedHeaders) == 0 {
		a.SignedHeaders = defaultHeadersOf(r)
	}
	want := signature(sk, a, r.Method, r.URL.Path, r.URL.Query(), requestHeader(r))
	if !hmac.Equal([]byte(want), []byte(a.Signature)) {
		return errorf(http.StatusBadRequest, CodeSignatureDoesNotMatch,
			"the request signature we calculated does not match the signature you provided; check your secret access key and signing method")
	}
	if e := v.checkSessionToken(a.AccessKey, r.Header.Get(headerSTSToken)); e != nil {
		return e
	}
	return checkContentMD5(r.Header.Get("Content-Md5"), body)
}

// checkFreshness rejects a request signed too long ago or too far in the future, judged both by the
// timestamp in the Authorization header and by x-bce-date (which the SDK sets and signs separately).
// Guess: the service's window; the emulator allows expireSeconds (or MaxClockSkew) either way.
func (v *verifier) checkFreshness(a authString, bceDate string) *apiError {
	window := v.maxSkew
	if window <= 0 {
		window = time.Duration(a.Expire) * time.Second
	}
	now := v.now()
	for _, s := range []string{a.Timestamp, bceDate} {
		if s == "" {
			continue
		}
		t, err := time.Parse(bceDateLayout, s)
		if err != nil {
			return errorf(http.StatusBadRequest, CodeInvalidHTTPAuthHeader, "x-bce-date %q is not ISO 8601 UTC", s)
		}
		if now.Sub(t) > window || t.Sub(now) > window {
			return errorf(http.StatusBadRequest, CodeRequestExpired, "Request has expired. Timestamp date is %s", s)
		}
	}
	return nil
}

// checkSessionToken enforces STS: an STS access key needs its token, and a permanent key must not carry one.
func (v *verifier) checkSessionToken(ak, token string) *apiError {
	want, isSTS := v.stsTokens[ak]
	switch {
	case isSTS && token == "":
		return errorf(http.StatusForbidden, CodeInvalidSessionToken, "access key %s is temporary and needs x-bce-security-token", ak)
	case isSTS && !hmac.Equal([]byte(token), []byte(want)):
		return errorf(http.StatusForbidden, CodeInvalidSessionToken, "the security token does not belong to access key %s", ak)
	case !isSTS && token != "":
		return errorf(http.StatusForbidden, CodeInvalidSessionToken, "access key %s is not a temporary key; drop x-bce-security-token", ak)
	}
	return nil
}

// checkContentMD5 compares a sent Content-MD5 with the body received. The signature only proves the header
// was not changed; this proves the body was not.
func checkContentMD5(sent string, body []byte) *apiError {
	if sent == "" {
		return nil
	}
	sum := md5.Sum(body)
	got := base64.StdEncoding.EncodeToString(sum[:])
	if !bytes.Equal([]byte(got), []byte(strings.TrimSpace(sent))) {
		return errorf(http.StatusBadRequest, CodeBadDigest, "the Content-MD5 you specified did not match what was received")
	}
	return nil
}

// defaultHeadersOf lists the headers signed when the Authorization header names none.
func defaultHeadersOf(r *http.Request) []string {
	names := append([]string(nil), defaultSignedHeaders...)
	for k := range r.Header {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "x-bce-") && lk != headerRequestID {
			names = append(names, lk)
		}
	}
	return names
}

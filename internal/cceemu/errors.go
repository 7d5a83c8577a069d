package cceemu

import (
	"fmt"
	"net/http"
)

// Error codes the emulator returns. The bce-auth ones are BCE's common error codes (bce-sdk-go bce/error.go and
// the public "common error code" tables); the cce.* ones follow the names the baiducloud provider matches on.
const (
	CodeAccessDenied          = "AccessDenied"          // 403
	CodeInvalidAccessKeyID    = "InvalidAccessKeyId"    // 403
	CodeInvalidHTTPAuthHeader = "InvalidHTTPAuthHeader" // 400
	CodeSignatureDoesNotMatch = "SignatureDoesNotMatch" // 400 (BCE documents 400, unlike S3's 403)
	CodeRequestExpired        = "RequestExpired"        // 400; note bce-sdk-go retries this code
	CodeInvalidURI            = "InvalidURI"            // 400/404

	// Guess: BOS names a Content-MD5 mismatch "BadDigest"; CCE's gateway is assumed to do the same.
	CodeBadDigest = "BadDigest" // 400
	// Guess: the code for a missing or wrong STS session token is not documented where we could read it.
	CodeInvalidSessionToken = "InvalidSessionToken" // 403

	CodeClusterNotFound       = "cce.warning.ClusterNotFound"       // 404
	CodeInstanceGroupNotFound = "cce.warning.InstanceGroupNotFound" // 404
	CodeInvalidParam          = "cce.warning.InvalidParam"          // 400
	CodeMalformedJSON         = "cce.warning.MalformedJSON"         // 400
	// Guess: the service's code for "this needs a running cluster" (kubeconfig of a provisioning cluster).
	CodeClusterNotRunning = "cce.warning.ClusterNotRunning" // 409
	CodeInternalError     = "cce.error.InternalServerError" // 500
	CodeThrottling        = "Throttling"                    // 429, for FailRequests callers
)

// apiError is an error response: the HTTP status and the JSON body {"code","message","requestId"} that
// bce-sdk-go decodes into *bce.BceServiceError.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func invalidParam(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, CodeInvalidParam, format, args...)
}

func clusterNotFound(id string) *apiError {
	return errorf(http.StatusNotFound, CodeClusterNotFound, "cluster %s not found", id)
}

func groupNotFound(id string) *apiError {
	return errorf(http.StatusNotFound, CodeInstanceGroupNotFound, "instance group %s not found", id)
}

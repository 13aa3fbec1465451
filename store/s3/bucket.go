package s3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/cachesvc/cachesvc/store"
)

// CheckBucket asks the server whether bucket exists, and sorts what can go
// wrong by what the operator must do about it:
//   - nil: it exists;
//   - an error wrapping store.ErrUnavailable: the server cannot be reached
//     now (a replica still starts, on its hot tier, and retries);
//   - any other error is the configuration's, and says what to change: no
//     such bucket, credentials refused, HTTPS
//     spoken to a plain-HTTP server, a certificate that is not trusted.
//
// The messages do not name the endpoint and bucket; callers add them.
func CheckBucket(ctx context.Context, c *minio.Client, bucket string) error {
	ok, err := c.BucketExists(ctx, bucket)
	if err == nil {
		if !ok {
			return errors.New("the bucket does not exist: create it (cachesvc creates no buckets) or check --s3-bucket")
		}
		return nil
	}
	if callerEnded(err) {
		return err
	}
	var certErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	switch resp := minio.ToErrorResponse(err); {
	case credentialsRefused(err):
		return fmt.Errorf("%s (%s): %s", strings.TrimSuffix(resp.Message, "."), resp.Code, checkCredentials)
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		// A plain-HTTP server answers an HTTPS client's handshake with
		// an HTTP error; retrying will never help.
		return fmt.Errorf("the server speaks plain HTTP, not HTTPS: give --s3-endpoint as http://HOST:PORT (or add --s3-insecure): %w", err)
	case errors.As(err, &certErr) || errors.As(err, &unknownCA) || errors.As(err, &hostErr):
		return fmt.Errorf("the server's TLS certificate is not trusted: %w (add its CA to the system's trust store, or point SSL_CERT_FILE at it)", err)
	case isUnavailable(err):
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// checkCredentials says what to do about credentials the server refused.
const checkCredentials = "check the credentials (--s3-credentials-file and --s3-profile, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"

// credentialsRefused reports whether err is the server refusing the
// credentials or their access to the bucket: retrying with the same ones
// helps only once someone fixes them (or a role's token is renewed).
func credentialsRefused(err error) bool {
	resp := minio.ToErrorResponse(err)
	switch resp.Code {
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken":
		return true
	}
	return resp.StatusCode == http.StatusForbidden
}

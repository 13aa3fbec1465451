package api

import (
	"errors"
	"io/fs"
	"net/http"
	"path"

	"github.com/gofiber/fiber/v2"

	"github.com/cachesvc/cachesvc/web"
)

// assetTypes maps the dashboard's file extensions to content types.
var assetTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".md":   "text/plain; charset=utf-8",
}

// serveAsset serves one embedded dashboard file by name.
func serveAsset(c *fiber.Ctx, name string) error {
	b, err := fs.ReadFile(web.FS(), name)
	if errors.Is(err, fs.ErrNotExist) {
		return Errorf(http.StatusNotFound, "not_found", "No dashboard asset %q.", name)
	}
	if err != nil {
		return err
	}
	ct, ok := assetTypes[path.Ext(name)]
	if !ok {
		ct = "text/plain; charset=utf-8"
	}
	c.Set(fiber.HeaderContentType, ct)
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("X-Content-Type-Options", "nosniff")
	return c.Send(b)
}

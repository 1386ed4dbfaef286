package handlers

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/resilience"
)

// Control is what the admin API steers. Implementations apply each change
// atomically and log it. An error matching config.ErrUnknownDependency
// means dep is not known; any other, that the change was invalid and
// nothing changed.
type Control interface {
	Settings() map[string]map[string]any // each dependency's, keyed like the --config file
	// Patch lays body (keys of dep's --config section) over dep's settings
	// and returns the result.
	Patch(dep string, body []byte) (map[string]any, error)
	ForceBreaker(dep string, f resilience.Force) error // sets or clears the operator override
}

var forces = map[string]resilience.Force{"open": resilience.ForceOpen, "closed": resilience.ForceClosed, "none": resilience.ForceNone}

// NewAdmin builds the admin API's router. Every request needs
// "Authorization: Bearer <token>", else 401; g, when set, checks Host and
// Origin first. A body over 64 KiB is refused with 413.
func NewAdmin(ctl Control, token string, g *HostGuard, logger *slog.Logger) *echo.Echo {
	e := newEcho(logger, g)
	e.Use(bearer(token), middleware.BodyLimit("64K"))
	get(e, "/admin/dependencies", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]any{"dependencies": ctl.Settings()})
	})
	e.PATCH("/admin/dependencies/:dep", func(c echo.Context) error {
		body, err := io.ReadAll(c.Request().Body) // past the limit, BodyLimit's 413
		if err != nil {
			return err
		}
		after, err := ctl.Patch(c.Param("dep"), body)
		if err != nil {
			return controlError(c.Param("dep"), err)
		}
		return c.JSON(http.StatusOK, map[string]any{"name": c.Param("dep"), "settings": after})
	})
	e.POST("/admin/dependencies/:dep/breaker", func(c echo.Context) error {
		var req struct {
			Force string `json:"force"`
		}
		dec := json.NewDecoder(c.Request().Body)
		dec.DisallowUnknownFields()
		err := dec.Decode(&req)
		f, ok := forces[req.Force]
		if err != nil || !ok || dec.More() {
			return &APIError{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: `body must be {"force":"open"|"closed"|"none"}`}
		}
		if err := ctl.ForceBreaker(c.Param("dep"), f); err != nil {
			return controlError(c.Param("dep"), err)
		}
		return c.JSON(http.StatusOK, map[string]string{"name": c.Param("dep"), "force": req.Force})
	})
	return e
}

// bearer answers 401 with a challenge to every request without the token;
// an empty token matches nothing. The comparison takes the same time
// whatever the key, its length included.
func bearer(token string) echo.MiddlewareFunc {
	want := sha256.Sum256([]byte(token))
	return middleware.KeyAuthWithConfig(middleware.KeyAuthConfig{
		KeyLookup:  "header:" + echo.HeaderAuthorization,
		AuthScheme: "Bearer",
		Validator: func(key string, _ echo.Context) (bool, error) {
			got := sha256.Sum256([]byte(key))
			return subtle.ConstantTimeCompare(got[:], want[:]) == 1 && token != "", nil
		},
		ErrorHandler: func(_ error, c echo.Context) error {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="orderagg-admin"`)
			return &APIError{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: "a valid bearer token is required"}
		},
	})
}

// controlError is a Control's error as the answer: 404 for an unknown
// dependency, else 400.
func controlError(dep string, err error) error {
	if errors.Is(err, config.ErrUnknownDependency) {
		return &APIError{Status: http.StatusNotFound, Code: CodeNotFound, Message: "unknown dependency " + strconv.Quote(dep)}
	}
	return &APIError{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: err.Error()}
}

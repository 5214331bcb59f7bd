#ifndef PARLEY_CVIPS_SHIM_H
#define PARLEY_CVIPS_SHIM_H
/*
 * libvips for Swift. libvips' operations are variadic (NULL-terminated name/value option
 * lists) and VIPS_INIT is a macro; Swift can call neither, so each operation Parley uses has
 * a fixed-argument wrapper here. All return 0 on success and -1 on failure (the message is in
 * vips_error_buffer()), like libvips itself; images come back with one reference the caller
 * releases with parley_vips_unref.
 */
#include <vips/vips.h>
#include <string.h>

#if VIPS_MAJOR_VERSION > 8 || (VIPS_MAJOR_VERSION == 8 && VIPS_MINOR_VERSION >= 15)
#define PARLEY_VIPS_HAS_KEEP 1
#endif

static void parley_vips_drop_log(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data) {
    (void)domain; (void)level; (void)message; (void)data;
}

/*
 * Starts libvips once per process and sets it up for a server: every image is new, so the
 * operation cache only pins memory (off); parallelism comes from Parley's worker pool, one
 * image per worker thread (libvips' own threads: `concurrency`); only the decoders Parley
 * feeds on purpose may run (every other loader, e.g. SVG, PDF, ImageMagick, is blocked so
 * that no code path can hand untrusted bytes to them); libvips warnings (truncated input,
 * ...) are dropped because Parley turns failures into error values.
 */
static inline int parley_vips_start(const char *argv0, int concurrency) {
    if (VIPS_INIT(argv0) != 0) return -1;
    vips_cache_set_max(0);
    vips_cache_set_max_mem(0);
    vips_cache_set_max_files(0);
    vips_concurrency_set(concurrency);
    vips_block_untrusted_set(TRUE);
    vips_operation_block_set("VipsForeignLoad", TRUE);
    vips_operation_block_set("VipsForeignLoadJpeg", FALSE);
    vips_operation_block_set("VipsForeignLoadPng", FALSE);
    vips_operation_block_set("VipsForeignLoadNsgif", FALSE);
    vips_operation_block_set("VipsForeignLoadWebp", FALSE);
    vips_operation_block_set("VipsForeignLoadHeif", FALSE);
    g_log_set_handler("VIPS", (GLogLevelFlags)(G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_INFO),
                      parley_vips_drop_log, NULL);
    return 0;
}

/* Whether this libvips can decode (load) and encode (save) HEIF: a dynamic module on Debian. */
static inline int parley_vips_can_load_heif(void) {
    return vips_type_find("VipsOperation", "heifload_buffer") != 0;
}
static inline int parley_vips_can_save_heif(void) {
    return vips_type_find("VipsOperation", "heifsave_buffer") != 0;
}

/* The message of the last failure on any thread, then cleared. */
static inline const char *parley_vips_error_message(void) { return vips_error_buffer(); }
static inline void parley_vips_error_clear(void) { vips_error_clear(); }

static inline void parley_vips_unref(VipsImage *image) { if (image) g_object_unref(image); }
static inline void parley_vips_free(void *pointer) { g_free(pointer); }

/* Formats Parley decodes; the numbering is Parley's own. */
enum {
    PARLEY_VIPS_JPEG = 1,
    PARLEY_VIPS_PNG = 2,
    PARLEY_VIPS_GIF = 3,
    PARLEY_VIPS_WEBP = 4,
    PARLEY_VIPS_HEIF = 5,
};

/*
 * Opens an encoded image with the loader for `format` (never by sniffing: the caller has
 * checked the magic bytes). Only the header is read here; pixels decode on demand, and a
 * truncated or corrupt file fails then (fail_on=error). `all_pages` loads every frame of an
 * animated GIF/WebP as one tall strip (page-height tells the frame height). The buffer must
 * outlive the image.
 */
static inline int parley_vips_load(int format, const void *buffer, size_t length, int all_pages, VipsImage **out) {
    int n = all_pages ? -1 : 1;
    switch (format) {
    case PARLEY_VIPS_JPEG:
        return vips_jpegload_buffer((void *)buffer, length, out, "fail_on", VIPS_FAIL_ON_ERROR, NULL);
    case PARLEY_VIPS_PNG:
        return vips_pngload_buffer((void *)buffer, length, out, "fail_on", VIPS_FAIL_ON_ERROR, NULL);
    case PARLEY_VIPS_GIF:
        return vips_gifload_buffer((void *)buffer, length, out, "n", n, "fail_on", VIPS_FAIL_ON_ERROR, NULL);
    case PARLEY_VIPS_WEBP:
        return vips_webpload_buffer((void *)buffer, length, out, "n", n, "fail_on", VIPS_FAIL_ON_ERROR, NULL);
    case PARLEY_VIPS_HEIF:
        return vips_heifload_buffer((void *)buffer, length, out, "n", 1, "fail_on", VIPS_FAIL_ON_ERROR, NULL);
    default:
        vips_error("parley", "unknown image format %d", format);
        return -1;
    }
}

static inline int parley_vips_width(VipsImage *image) { return vips_image_get_width(image); }
static inline int parley_vips_height(VipsImage *image) { return vips_image_get_height(image); }
static inline int parley_vips_bands(VipsImage *image) { return vips_image_get_bands(image); }
static inline int parley_vips_page_height(VipsImage *image) { return vips_image_get_page_height(image); }
static inline int parley_vips_pages(VipsImage *image) { return vips_image_get_n_pages(image); }
static inline int parley_vips_has_alpha(VipsImage *image) { return vips_image_hasalpha(image); }
static inline int parley_vips_orientation(VipsImage *image) { return vips_image_get_orientation(image); }
static inline int parley_vips_has_field(VipsImage *image, const char *name) {
    return vips_image_get_typeof(image, name) != 0;
}

/* Rotates/flips the pixels as the EXIF orientation says and removes the orientation tag. */
static inline int parley_vips_autorot(VipsImage *in, VipsImage **out) {
    return vips_autorot(in, out, NULL);
}

/*
 * Brings the pixels to 8-bit sRGB (or 8-bit grey): through the embedded ICC profile when
 * there is one (CMYK, Display P3, Adobe RGB ...), so colours survive the profile being
 * stripped; by the interpretation otherwise.
 */
static inline int parley_vips_to_srgb(VipsImage *in, VipsImage **out) {
    VipsImage *converted = NULL;
    VipsInterpretation interpretation = vips_image_guess_interpretation(in);
    int grey = interpretation == VIPS_INTERPRETATION_B_W || interpretation == VIPS_INTERPRETATION_GREY16;
    if (vips_image_get_typeof(in, VIPS_META_ICC_NAME) && !grey) {
        if (vips_icc_transform(in, &converted, "srgb", "embedded", TRUE, "intent", VIPS_INTENT_PERCEPTUAL, NULL) != 0) {
            /* A broken profile: fall back to the interpretation rather than refusing. */
            vips_error_clear();
            converted = NULL;
        }
    }
    if (!converted) {
        VipsInterpretation target = grey ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB;
        if (vips_colourspace(in, &converted, target, NULL) != 0) return -1;
    }
    if (vips_image_get_format(converted) != VIPS_FORMAT_UCHAR) {
        /* 16-bit sources scale down (shift), anything else clips. */
        VipsImage *uchar = NULL;
        int shift = vips_image_get_format(converted) == VIPS_FORMAT_USHORT;
        int status = vips_cast(converted, &uchar, VIPS_FORMAT_UCHAR, "shift", shift, NULL);
        g_object_unref(converted);
        if (status != 0) return -1;
        converted = uchar;
    }
    *out = converted;
    return 0;
}

/* Fields a saver needs to write an animation; every other field is metadata. */
static inline int parley_vips_is_animation_field(const char *name) {
    return strcmp(name, "page-height") == 0 || strcmp(name, "n-pages") == 0 || strcmp(name, "delay") == 0
        || strcmp(name, "loop") == 0 || strcmp(name, "gif-delay") == 0 || strcmp(name, "gif-loop") == 0;
}

/*
 * A copy of `in` without any metadata: EXIF (GPS included), XMP, IPTC, ICC profile,
 * orientation, comments, and whatever else a loader attached. Savers are also told to strip,
 * so metadata is dropped twice over.
 */
static inline int parley_vips_copy_without_metadata(VipsImage *in, VipsImage **out) {
    if (vips_copy(in, out, NULL) != 0) return -1;
    gchar **fields = vips_image_get_fields(*out);
    for (gchar **field = fields; field && *field; field++) {
        if (!parley_vips_is_animation_field(*field)) vips_image_remove(*out, *field);
    }
    g_strfreev(fields);
    return 0;
}

/* Every field name on the image, comma-separated (free with parley_vips_free); for tests. */
static inline char *parley_vips_field_names(VipsImage *image) {
    gchar **fields = vips_image_get_fields(image);
    char *joined = g_strjoinv(",", fields);
    g_strfreev(fields);
    return joined;
}

/* The frame `page` (0-based) of an animation strip. */
static inline int parley_vips_page(VipsImage *in, int page, VipsImage **out) {
    int page_height = vips_image_get_page_height(in);
    return vips_crop(in, out, 0, page * page_height, vips_image_get_width(in), page_height, NULL);
}

/* Flattens an alpha channel onto an opaque background (JPEG has no alpha). */
static inline int parley_vips_flatten(VipsImage *in, VipsImage **out, double red, double green, double blue) {
    double background[3] = { red, green, blue };
    VipsArrayDouble *array = vips_array_double_new(background, 3);
    int status = vips_flatten(in, out, "background", array, NULL);
    vips_area_unref(VIPS_AREA(array));
    return status;
}

/* Decodes every pixel into memory now: decoding failures (truncation) surface here, once. */
static inline VipsImage *parley_vips_copy_memory(VipsImage *in) { return vips_image_copy_memory(in); }

/* Downsizes so that neither side exceeds `width` x `height`; never upsizes. */
static inline int parley_vips_thumbnail_image(VipsImage *in, VipsImage **out, int width, int height) {
    return vips_thumbnail_image(in, out, width, "height", height, "size", VIPS_SIZE_DOWN, NULL);
}

/* Thumbnail straight from an encoded buffer (shrink-on-load; honours EXIF orientation). */
static inline int parley_vips_thumbnail_buffer(const void *buffer, size_t length, VipsImage **out, int width, int height) {
    return vips_thumbnail_buffer((void *)buffer, length, out, width, "height", height, "size", VIPS_SIZE_DOWN, NULL);
}

#ifdef PARLEY_VIPS_HAS_KEEP
#define PARLEY_VIPS_STRIP "keep", VIPS_FOREIGN_KEEP_NONE
#else
#define PARLEY_VIPS_STRIP "strip", TRUE
#endif

/* Encoders. The buffer comes back in *buffer (free with parley_vips_free), metadata stripped. */
static inline int parley_vips_jpegsave(VipsImage *in, void **buffer, size_t *length, int quality) {
    return vips_jpegsave_buffer(in, buffer, length, "Q", quality, "optimize_coding", TRUE, PARLEY_VIPS_STRIP, NULL);
}
static inline int parley_vips_webpsave(VipsImage *in, void **buffer, size_t *length, int quality, int lossless) {
    return vips_webpsave_buffer(in, buffer, length, "Q", quality, "lossless", lossless, PARLEY_VIPS_STRIP, NULL);
}
static inline int parley_vips_pngsave(VipsImage *in, void **buffer, size_t *length) {
    return vips_pngsave_buffer(in, buffer, length, "compression", 6, PARLEY_VIPS_STRIP, NULL);
}
static inline int parley_vips_gifsave(VipsImage *in, void **buffer, size_t *length) {
    return vips_gifsave_buffer(in, buffer, length, PARLEY_VIPS_STRIP, NULL);
}
static inline int parley_vips_heifsave(VipsImage *in, void **buffer, size_t *length, int quality) {
    return vips_heifsave_buffer(in, buffer, length, "Q", quality, "compression", VIPS_FOREIGN_HEIF_COMPRESSION_HEVC, NULL);
}

/* An image over a copy of raw 8-bit pixels (row-major, `bands` interleaved): for fixtures. */
static inline VipsImage *parley_vips_from_pixels(const void *pixels, size_t length, int width, int height, int bands) {
    VipsImage *image = vips_image_new_from_memory_copy(pixels, length, width, height, bands, VIPS_FORMAT_UCHAR);
    if (image && bands >= 3) image->Type = VIPS_INTERPRETATION_sRGB;
    return image;
}

/* Every pixel as 8-bit interleaved bytes (free with parley_vips_free); for tests. */
static inline void *parley_vips_pixels(VipsImage *in, size_t *length) {
    return vips_image_write_to_memory(in, length);
}

/* Sets an integer field (for fixtures: page-height makes a strip an animation). */
static inline void parley_vips_set_int(VipsImage *image, const char *name, int value) {
    vips_image_set_int(image, name, value);
}

/* Attaches a blob field, e.g. "exif-data" (for fixtures: heifsave writes it into the file). */
static inline void parley_vips_set_blob(VipsImage *image, const char *name, const void *data, size_t length) {
    vips_image_set_blob_copy(image, name, data, length);
}
#endif

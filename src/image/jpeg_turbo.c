/*
 * streamload's bridge to libjpeg-turbo (the system's libjpeg62-turbo, classic libjpeg API):
 * JPEG decoding with DCT scaling (scale_num/scale_denom) and a crop window decoded on its own
 * (jpeg_crop_scanline + jpeg_skip_scanlines), into RGB bytes.
 *
 * libjpeg reports a fatal error by calling err->error_exit, whose default prints and calls
 * exit(). Here error_exit longjmps back into the function that started the decode, which
 * destroys the decompressor and returns -1 with the message in `err`: no path reaches exit()
 * or abort(). Warnings (corrupt data libjpeg can step over, a truncated file it would pad with
 * grey) are errors too, as in tf.io.decode_jpeg: strict decoding.
 *
 * The caller (src/image/jpeg_turbo.rs) reads the header first, checks the pixel count against
 * its limit, and only then allocates the output and calls sl_jpeg_decode.
 */
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#define SL_ERR_LEN 200
/* More scans than this in a progressive JPEG is an error: libjpeg-turbo's advice against the
   "many scans" denial of service (a few kilobytes that take minutes to decode). */
#define SL_MAX_SCANS 1000

struct sl_error {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char *msg;
};

struct sl_progress {
    struct jpeg_progress_mgr pub;
};

static void sl_error_exit(j_common_ptr cinfo) {
    struct sl_error *err = (struct sl_error *)cinfo->err;
    char buf[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, buf);
    snprintf(err->msg, SL_ERR_LEN, "%s", buf);
    longjmp(err->jump, 1);
}

static void sl_emit_message(j_common_ptr cinfo, int msg_level) {
    /* msg_level -1 is a warning: corrupt data, or a truncated file libjpeg would pad with grey.
       Strict: stop here. Two exceptions: extraneous bytes before a marker (common in real data
       sets, ImageNet's included, and harmless: nothing is lost) and trace messages (>= 0). */
    if (msg_level < 0 && cinfo->err->msg_code != JWRN_EXTRANEOUS_DATA) {
        sl_error_exit(cinfo);
    }
}

static void sl_progress_monitor(j_common_ptr cinfo) {
    if (cinfo->is_decompressor) {
        j_decompress_ptr d = (j_decompress_ptr)cinfo;
        if (d->input_scan_number > SL_MAX_SCANS) {
            struct sl_error *err = (struct sl_error *)cinfo->err;
            snprintf(err->msg, SL_ERR_LEN,
                     "progressive JPEG with more than %d scans (refused as a decompression bomb)",
                     SL_MAX_SCANS);
            longjmp(err->jump, 1);
        }
    }
}

/* What the header says. */
struct sl_header {
    unsigned int width;
    unsigned int height;
    int components;
    int progressive;
};

static void sl_setup(struct jpeg_decompress_struct *cinfo, struct sl_error *err, char *msg) {
    err->msg = msg;
    msg[0] = 0;
    cinfo->err = jpeg_std_error(&err->pub);
    err->pub.error_exit = sl_error_exit;
    err->pub.emit_message = sl_emit_message;
}

int sl_jpeg_header(const unsigned char *data, unsigned long len, struct sl_header *out,
                   char *msg) {
    struct jpeg_decompress_struct cinfo;
    struct sl_error err;
    sl_setup(&cinfo, &err, msg);
    if (setjmp(err.jump)) {
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, len);
    jpeg_read_header(&cinfo, TRUE);
    out->width = cinfo.image_width;
    out->height = cinfo.image_height;
    out->components = cinfo.num_components;
    out->progressive = cinfo.progressive_mode ? 1 : 0;
    jpeg_destroy_decompress(&cinfo);
    return 0;
}

static unsigned char sl_clamp(int v) { return (unsigned char)(v < 0 ? 0 : (v > 255 ? 255 : v)); }

struct sl_request {
    unsigned int scale_denom;
    unsigned int crop_x, crop_y, crop_w, crop_h;
    unsigned long long max_pixels;
    unsigned char *out;
    unsigned long long out_len;
};

/* The decode proper; any libjpeg error longjmps out of it to sl_jpeg_decode, which set the
   jump and owns cinfo (so nothing here needs to survive the jump). Returns 0 or -1. */
static int sl_decode_body(struct jpeg_decompress_struct *cinfo, const struct sl_request *req,
                          char *msg) {
    jpeg_read_header(cinfo, TRUE);
    if ((unsigned long long)cinfo->image_width * cinfo->image_height > req->max_pixels) {
        snprintf(msg, SL_ERR_LEN, "JPEG of %ux%u pixels is over the limit of %llu pixels",
                 cinfo->image_width, cinfo->image_height, req->max_pixels);
        return -1;
    }
    int cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
    cinfo->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    cinfo->scale_num = 1;
    cinfo->scale_denom = req->scale_denom;
    /* tf.io.decode_jpeg's defaults: dct_method "" is libjpeg's INTEGER_FAST, fancy upscaling
       on (libjpeg's default). */
    cinfo->dct_method = JDCT_IFAST;
    jpeg_start_decompress(cinfo);
    unsigned int width = cinfo->output_width;
    unsigned int height = cinfo->output_height;
    unsigned int crop_x = req->crop_x, crop_y = req->crop_y;
    unsigned int crop_w = req->crop_w, crop_h = req->crop_h;
    if (crop_w == 0 || crop_h == 0) {
        crop_x = 0;
        crop_y = 0;
        crop_w = width;
        crop_h = height;
    }
    if (crop_x > width || crop_w > width - crop_x || crop_y > height ||
        crop_h > height - crop_y) {
        snprintf(msg, SL_ERR_LEN, "crop window %ux%u at (%u, %u) is outside the %ux%u image",
                 crop_w, crop_h, crop_x, crop_y, width, height);
        return -1;
    }
    if ((unsigned long long)crop_w * crop_h * 3 > req->out_len) {
        snprintf(msg, SL_ERR_LEN, "output buffer too small");
        return -1;
    }
    /* Decode only the columns of the window, widened to iMCU boundaries by libjpeg. */
    JDIMENSION xoff = crop_x, cw = crop_w;
    if (crop_w < width) {
        jpeg_crop_scanline(cinfo, &xoff, &cw);
    }
    unsigned int skip_left = crop_x - xoff;
    int comps = cinfo->output_components;
    if (crop_y > 0 && jpeg_skip_scanlines(cinfo, crop_y) != crop_y) {
        snprintf(msg, SL_ERR_LEN, "JPEG ended before row %u", crop_y);
        return -1;
    }
    if (!cmyk && skip_left == 0 && cw == crop_w && cinfo->output_width == crop_w) {
        /* The window is whole rows of RGB: libjpeg writes them straight into `out`, a few rows
           a call (its output buffer height), with no row buffer and no copy. */
        JSAMPROW rows[16];
        unsigned int y = 0;
        while (y < crop_h) {
            unsigned int n = crop_h - y < 16 ? crop_h - y : 16;
            for (unsigned int i = 0; i < n; i++) {
                rows[i] = req->out + (unsigned long long)(y + i) * crop_w * 3;
            }
            JDIMENSION got = jpeg_read_scanlines(cinfo, rows, n);
            if (got == 0) {
                snprintf(msg, SL_ERR_LEN, "JPEG ended at row %u of %u", crop_y + y, height);
                return -1;
            }
            y += got;
        }
        return 0;
    }
    JSAMPARRAY row = (*cinfo->mem->alloc_sarray)((j_common_ptr)cinfo, JPOOL_IMAGE,
                                                 cinfo->output_width * comps, 1);
    for (unsigned int y = 0; y < crop_h; y++) {
        if (jpeg_read_scanlines(cinfo, row, 1) != 1) {
            snprintf(msg, SL_ERR_LEN, "JPEG ended at row %u of %u", crop_y + y, height);
            return -1;
        }
        unsigned char *dst = req->out + (unsigned long long)y * crop_w * 3;
        const unsigned char *src = row[0] + (unsigned long long)skip_left * comps;
        if (!cmyk) {
            memcpy(dst, src, (size_t)crop_w * 3);
        } else {
            /* tf.io.decode_jpeg's CMYK to RGB: Adobe's files store CMYK inverted. */
            for (unsigned int x = 0; x < crop_w; x++) {
                int c = src[4 * x], m = src[4 * x + 1], ye = src[4 * x + 2], k = src[4 * x + 3];
                if (cinfo->saw_Adobe_marker) {
                    dst[3 * x] = sl_clamp(k * c / 255);
                    dst[3 * x + 1] = sl_clamp(k * m / 255);
                    dst[3 * x + 2] = sl_clamp(k * ye / 255);
                } else {
                    dst[3 * x] = sl_clamp((255 - k) * (255 - c) / 255);
                    dst[3 * x + 1] = sl_clamp((255 - k) * (255 - m) / 255);
                    dst[3 * x + 2] = sl_clamp((255 - k) * (255 - ye) / 255);
                }
            }
        }
    }
    return 0;
}

/*
 * Decodes `data` at scale 1/scale_denom (1, 2, 4 or 8), keeping the window of the scaled image
 * at (crop_x, crop_y) of crop_w x crop_h pixels (the whole scaled image when crop_w == 0), into
 * `out` as packed RGB rows: out_len must be at least crop_w * crop_h * 3. max_pixels bounds the
 * full image (checked again here, before libjpeg allocates anything sized by the header).
 * Returns 0, or -1 with a message in msg (SL_ERR_LEN bytes).
 *
 * Rows below the window are never decoded: jpeg_finish_decompress would want them read, so the
 * decompressor is destroyed (which aborts it and frees everything) instead.
 */
int sl_jpeg_decode(const unsigned char *data, unsigned long len,
                   const struct sl_request *req, char *msg) {
    struct jpeg_decompress_struct cinfo;
    struct sl_error err;
    struct sl_progress progress;
    sl_setup(&cinfo, &err, msg);
    if (setjmp(err.jump)) {
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    jpeg_create_decompress(&cinfo);
    progress.pub.progress_monitor = sl_progress_monitor;
    cinfo.progress = &progress.pub;
    jpeg_mem_src(&cinfo, data, len);
    int rc = sl_decode_body(&cinfo, req, msg);
    jpeg_destroy_decompress(&cinfo);
    return rc;
}

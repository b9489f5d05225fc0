// The splat viewer's browser side: Spark (a three.js Gaussian-splat renderer) in a canvas that follows
// its container's size, with the camera given in the workbench's conventions (OpenCV world-to-camera
// viewmat, pinhole K in pixels for a width x height image) and read back in them. Two entry points
// share `mount`: the anywidget module (default export) and the standalone page
// (`globalThis.gswMountViewer`).
import * as THREE from "three";
import { OrbitControls } from "three/addons/controls/OrbitControls.js";
import { SparkControls, SparkRenderer, SplatMesh } from "@sparkjsdev/spark";

// OpenCV camera axes (x right, y down, z forward) to three.js's (x right, y up, z backward).
const CV_TO_GL = new THREE.Matrix4().makeScale(1, -1, -1);

// .spz stores RUB (three.js) axes; the writer turned the workbench's world by 180 degrees about x,
// so the mesh turns it back. PLY and .splat are stored in the world's own axes.
const TURNED_FORMATS = new Set(["spz"]);

/** The pinhole K (9 numbers, row-major) that shows a width x height image's K on a viewW x viewH
 * canvas: the image scaled to fit (the larger scale at which all of it shows) and centred, so the
 * canvas shows more of the scene beyond two of its edges. A canvas of the image's own size gets K
 * itself, exactly. */
export function fitIntrinsics(K, width, height, viewW, viewH) {
  const scale = Math.min(viewW / width, viewH / height);
  const ox = (viewW - scale * width) / 2, oy = (viewH - scale * height) / 2;
  return [
    scale * K[0], scale * K[1], scale * K[2] + ox,
    0, scale * K[4], scale * K[5] + oy,
    0, 0, 1,
  ];
}

/** A perspective camera whose projection is an OpenCV pinhole K for a width x height image, shown on
 * a viewW x viewH canvas (`fitIntrinsics`): on a canvas of the image's size, the pixel
 * u = fx x/z + s y/z + cx (pixel centres at i + 0.5) lands at the same place on the canvas. */
class PinholeCamera extends THREE.PerspectiveCamera {
  constructor(near = 0.01, far = 1e4) {
    super(50, 1, near, far);
    this.K = null;
    this.imageWidth = 1;
    this.imageHeight = 1;
    this.viewWidth = null;  // null: the image's own size
    this.viewHeight = null;
  }

  setIntrinsics(K, width, height) {
    this.K = Array.from(K);
    this.imageWidth = width;
    this.imageHeight = height;
    this.updateProjectionMatrix();
  }

  /** The canvas size in CSS pixels the image is fitted into. */
  setViewport(viewW, viewH) {
    this.viewWidth = viewW;
    this.viewHeight = viewH;
    this.updateProjectionMatrix();
  }

  updateProjectionMatrix() {
    if (!this.K) {
      super.updateProjectionMatrix();
      return;
    }
    const W = this.viewWidth || this.imageWidth, H = this.viewHeight || this.imageHeight;
    const [fx, s, cx, , fy, cy] = fitIntrinsics(this.K, this.imageWidth, this.imageHeight, W, H);
    // fov and aspect too, for code that reads them (Spark's level of detail)
    this.fov = (2 * Math.atan(H / (2 * fy)) * 180) / Math.PI;
    this.aspect = (W / fx) / (H / fy);
    const n = this.near, f = this.far;
    // clip = P [X, Y, Z, 1] in GL camera axes (x = X, y = -Y, z = -Z in OpenCV's); w = -Z
    this.projectionMatrix.set(
      (2 * fx) / W, (-2 * s) / W, 1 - (2 * cx) / W, 0,
      0, (2 * fy) / H, (2 * cy) / H - 1, 0,
      0, 0, -(f + n) / (f - n), (-2 * f * n) / (f - n),
      0, 0, -1, 0,
    );
    this.projectionMatrixInverse.copy(this.projectionMatrix).invert();
  }

  /** Pose from a row-major world-to-camera viewmat (16 numbers, OpenCV axes). */
  setViewmat(viewmat) {
    const camToWorld = new THREE.Matrix4().fromArray(viewmat).transpose().invert().multiply(CV_TO_GL);
    camToWorld.decompose(this.position, this.quaternion, this.scale);
    this.updateMatrixWorld(true);
  }

  /** The row-major world-to-camera viewmat (16 numbers, OpenCV axes) of the current pose. */
  getViewmat() {
    this.updateMatrixWorld(true);
    const m = this.matrixWorld.clone().multiply(CV_TO_GL).invert().transpose();
    return Array.from(m.elements);
  }
}

function toBytes(value) {
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  throw new Error("splat data must be binary");
}

// How the viewer's box is sized: "page" fills the window (the standalone page: a width x height
// window shows exactly the camera's image); "widget" spans its container's width at the image's
// aspect ratio, at most 70% of the browser window's height (a square image in a wide notebook would
// otherwise push the controls out of view), and its height can be dragged (bottom-right corner).
const LAYOUTS = {
  page: () => "position:fixed;left:0;top:0;right:0;bottom:0;overflow:hidden",
  widget: (w, h) => `position:relative;width:100%;aspect-ratio:${w} / ${h};max-height:70vh;min-height:120px;` +
    "overflow:hidden;resize:vertical",
};

// The overlay's words when the browser takes the WebGL context away (a GPU process restart, too many
// contexts, a driver reset), and when it does not give it back.
const CONTEXT_LOST = "WebGL context lost: waiting for the browser to restore it";
const CONTEXT_GONE = "WebGL context lost and not restored: re-run the cell (or reload the page) to see the splats again";
const CONTEXT_WAIT_MS = 5000;

/**
 * Mounts a viewer in `el`. opts: width, height (CSS px: the image K refers to, and the widget's
 * aspect ratio), layout ("widget", the default, or "page"), background [r,g,b] in [0,1], camera
 * {viewmat: 16 numbers row-major, K: 9 numbers row-major}, center [3] (orbit target), up [3] (the
 * scene's up axis in world coordinates: the orbit turns about it; default the initial camera's up),
 * views [{name, viewmat, K}], onCamera(camera) called (throttled) when the user moves the view.
 *
 * It draws only when something changed (the camera, the splats, the size, the background, or Spark's
 * sort or level of detail coming back), so an untouched viewer takes no CPU or GPU time.
 */
export function mount(el, opts) {
  const width = opts.width, height = opts.height;
  const layout = LAYOUTS[opts.layout || "widget"];
  if (!layout) throw new Error(`unknown layout ${opts.layout}: use "widget" or "page"`);
  const root = document.createElement("div");
  root.style.cssText = layout(width, height);
  el.appendChild(root);

  const renderer = new THREE.WebGLRenderer({ antialias: false, preserveDrawingBuffer: true });
  renderer.setPixelRatio(window.devicePixelRatio || 1);
  renderer.setSize(width, height);
  // absolute: the canvas never props its box open, so the box can shrink
  renderer.domElement.style.cssText += ";display:block;position:absolute;left:0;top:0";
  renderer.domElement.tabIndex = 0;
  root.appendChild(renderer.domElement);

  const scene = new THREE.Scene();
  let spark = null;
  function makeSpark() {
    // the workbench's rasterize: eps2d = 0.3 added to the 2D covariance without opacity compensation,
    // 3 standard deviations, alpha below 1/255 skipped, splats sorted by view depth. onDirty: a sort
    // or a level-of-detail update came back, so the picture on screen is stale.
    spark = new SparkRenderer({
      renderer, maxStdDev: 3, preBlurAmount: 0.3, blurAmount: 0, minAlpha: 1 / 255, sortRadial: false,
      onDirty: () => requestRender(),
    });
    scene.add(spark);
  }

  const camera = new PinholeCamera();
  scene.add(camera);

  const hud = document.createElement("div");
  hud.style.cssText = "position:absolute;left:4px;top:4px;font:12px monospace;color:#fff;" +
    "background:rgba(0,0,0,0.45);padding:2px 6px;border-radius:3px;user-select:none";
  const info = document.createElement("span");
  const modeButton = document.createElement("button");
  modeButton.style.cssText = "margin-left:6px;font:11px monospace";
  const viewSelect = document.createElement("select");
  viewSelect.style.cssText = "margin-left:6px;font:11px monospace";
  hud.append(info, modeButton, viewSelect);
  root.appendChild(hud);
  // one line over the canvas when it cannot draw (a lost WebGL context)
  const notice = document.createElement("div");
  notice.style.cssText = "position:absolute;left:0;right:0;top:45%;text-align:center;font:13px sans-serif;" +
    "color:#fff;background:rgba(0,0,0,0.6);padding:6px;display:none";
  root.appendChild(notice);

  // ---- drawing on demand: a frame is drawn only after requestRender, at most once per display frame
  let running = true, contextLost = false, frameQueued = false, continuous = 0, framesDrawn = 0;
  const frameWaiters = [];  // called with each drawn frame's time stamp (ms), once
  function requestRender() {
    if (running && !frameQueued) {
      frameQueued = true;
      requestAnimationFrame(frame);
    }
  }

  // the camera's up is the scene's: OrbitControls reads it once, when it is made (so it is made anew
  // when the up axis changes), and keeps the camera's height along it while it turns
  let sceneUp = null;
  let orbit = null;
  let fly = null;  // SparkControls (WASD + drag to look), created on first use
  let mode = "orbit";
  let center = new THREE.Vector3().fromArray(opts.center || [0, 0, 0]);
  function makeOrbit() {
    const pose = orbit ? camera.getViewmat() : null;
    if (orbit) orbit.dispose();
    camera.up.copy(sceneUp);
    orbit = new OrbitControls(camera, renderer.domElement);  // its constructor moves the camera
    orbit.enableDamping = false;
    orbit.enabled = mode === "orbit";
    orbit.addEventListener("change", requestRender);
    if (pose) camera.setViewmat(pose);
  }
  function setUp(up) {
    const v = new THREE.Vector3().fromArray(up);
    if (!(v.lengthSq() > 0)) throw new Error(`up must be a nonzero 3-vector, got ${up}`);
    sceneUp = v.normalize();
    makeOrbit();
    retarget();
  }

  // the canvas follows its box: the drawing buffer takes the box's size and the camera fits the
  // image into it (fitIntrinsics). Whole CSS pixels, so a width x height box draws exactly the image.
  let viewSize = [width, height];
  function fitToBox() {
    const box = root.getBoundingClientRect();
    const w = Math.floor(box.width), h = Math.floor(box.height);
    if (w < 1 || h < 1 || (w === viewSize[0] && h === viewSize[1])) return;  // hidden, or unchanged
    viewSize = [w, h];
    renderer.setSize(w, h);
    camera.setViewport(w, h);
    requestRender();
  }
  const resizeObserver = new ResizeObserver(fitToBox);
  resizeObserver.observe(root);

  function retarget() {
    // the orbit centre: the scene centre's depth, straight ahead, so starting to orbit never jumps
    const forward = new THREE.Vector3(0, 0, -1).applyQuaternion(camera.quaternion);
    const depth = Math.max(center.clone().sub(camera.position).dot(forward), 1e-3);
    orbit.target.copy(camera.position).addScaledVector(forward, depth);
  }

  function setMode(next) {
    mode = next;
    orbit.enabled = mode === "orbit";
    if (mode === "fly" && !fly) fly = new SparkControls({ canvas: renderer.domElement });
    if (fly) fly.pointerControls.enable = mode === "fly";
    if (mode === "orbit") retarget();
    modeButton.textContent = mode === "orbit" ? "orbit (click: fly)" : "fly: WASD+drag (click: orbit)";
    requestRender();
  }
  modeButton.onclick = () => setMode(mode === "orbit" ? "fly" : "orbit");

  // fly mode moves the camera in its own update, from keys held and drags: draw while a key is down
  // or the last update moved the camera, and start drawing on any input
  const keysDown = new Set();
  const canvas = renderer.domElement;
  const onKeyDown = (e) => { keysDown.add(e.code); requestRender(); };
  const onKeyUp = (e) => { keysDown.delete(e.code); requestRender(); };
  const onBlur = () => keysDown.clear();
  for (const ev of ["pointerdown", "pointermove", "pointerup", "wheel"]) canvas.addEventListener(ev, requestRender);
  window.addEventListener("keydown", onKeyDown);
  window.addEventListener("keyup", onKeyUp);
  window.addEventListener("blur", onBlur);

  let K = null;
  function setCamera(cam) {
    K = Array.from(cam.K);
    camera.setIntrinsics(K, width, height);
    camera.setViewmat(Array.from(cam.viewmat));
    retarget();
    lastSent = cameraKey();
    requestRender();
  }

  function getCamera() {
    return { viewmat: camera.getViewmat(), K: K.slice(), width, height };
  }

  let views = [];
  function setViews(list) {
    views = list || [];
    viewSelect.replaceChildren(new Option("views", ""), ...views.map((v, i) => new Option(v.name, String(i))));
    viewSelect.style.display = views.length ? "" : "none";
  }
  viewSelect.onchange = () => {
    const v = views[Number(viewSelect.value)];
    if (v) {
      setCamera(v);
      lastSent = "";  // report the jump to Python
      reportCamera();
    }
    viewSelect.value = "";
  };

  let mesh = null;
  let numSplats = 0;
  let loading = Promise.resolve();
  let generation = 0;  // a newer setData wins even when an older one finishes loading after it
  let source = null;  // the last data given, kept to load it again into a restored WebGL context
  function setData(bytes, fileType, count) {
    const mine = ++generation;
    source = { bytes: toBytes(bytes).slice(), fileType, count };
    // extSplats: float32 centres and finer scales than the default 16-byte packing (float16 centres)
    const next = new SplatMesh({ fileBytes: source.bytes.slice(), fileType, extSplats: true });
    if (TURNED_FORMATS.has(fileType)) next.quaternion.set(1, 0, 0, 0);
    loading = next.initialized.then(() => {
      if (mine !== generation) {
        next.dispose();
        return;
      }
      if (mesh) {
        scene.remove(mesh);
        mesh.dispose();
      }
      mesh = next;
      scene.add(mesh);
      numSplats = count;
      updateInfo();
      requestRender();
    });
    return loading;
  }

  let status = "";
  let fps = 0;
  function updateInfo() {
    const rate = fps > 0 ? `  ${fps.toFixed(1)} fps` : "";
    info.textContent = `${numSplats.toLocaleString()} splats${rate}${status ? "  " + status : ""}`;
  }
  function setStatus(text) {
    status = text || "";
    updateInfo();
  }

  function setBackground(rgb) {
    renderer.setClearColor(new THREE.Color().setRGB(rgb[0], rgb[1], rgb[2], THREE.SRGBColorSpace), 1);
    requestRender();
  }

  // ---- the camera back to Python: at most every 200 ms, and always the last pose once it stops
  let lastSent = "";
  let lastSentTime = 0;
  let reportTimer = null;
  function cameraKey() {
    camera.updateMatrixWorld(true);
    return camera.matrixWorld.elements.join(",");
  }
  function reportCamera() {
    if (!opts.onCamera || !running || reportTimer !== null) return;
    const wait = lastSentTime + 200 - performance.now();
    if (wait > 0) {
      reportTimer = setTimeout(() => { reportTimer = null; reportCamera(); }, wait);
      return;
    }
    const key = cameraKey();
    if (key !== lastSent) {
      lastSent = key;
      lastSentTime = performance.now();
      opts.onCamera(getCamera());
    }
  }

  // the frame rate while drawing: frames over the last half second or more of continuous drawing
  let rateFrames = 0, rateStart = 0, lastFrameTime = -1;
  function frame(now) {
    frameQueued = false;
    if (!running || contextLost) return;
    let moved = false;
    if (mode === "fly" && fly) moved = fly.update(camera);
    renderer.render(scene, camera);
    framesDrawn += 1;
    if (lastFrameTime < 0 || now - lastFrameTime > 250) {  // drawing starts again after a pause
      rateFrames = 0;
      rateStart = now;
    } else if (now - rateStart >= 500) {
      fps = (1000 * rateFrames) / (now - rateStart);
      rateFrames = 0;
      rateStart = now;
      updateInfo();
    }
    rateFrames += 1;
    lastFrameTime = now;
    for (const w of frameWaiters.splice(0)) w(now);
    reportCamera();
    const flying = mode === "fly" && (moved || keysDown.size > 0);
    if (continuous > 0 || flying || frameWaiters.length > 0 || (spark && spark.dirty)) requestRender();
  }

  // ---- a lost WebGL context: three.js restores its own state; Spark's textures and sort are made
  // anew and the splats loaded again. Until then (or if the browser never gives the context back),
  // one line over the canvas says what happened.
  let goneTimer = null;
  function onContextLost(event) {
    event.preventDefault();  // tells the browser the page will restore: without it, no restore event
    contextLost = true;
    // Spark's objects belong to the lost context: let them go now (WebGL ignores calls on a lost
    // context, where deleting them from the restored one would be an error)
    scene.remove(spark);
    spark.dispose();
    spark = null;
    if (mesh) {
      scene.remove(mesh);
      mesh.dispose();
      mesh = null;
    }
    notice.textContent = CONTEXT_LOST;
    notice.style.display = "";
    goneTimer = setTimeout(() => { notice.textContent = CONTEXT_GONE; }, CONTEXT_WAIT_MS);
  }
  function onContextRestored() {
    clearTimeout(goneTimer);
    contextLost = false;
    notice.style.display = "none";
    makeSpark();
    if (source) setData(source.bytes, source.fileType, source.count);
    requestRender();
  }
  canvas.addEventListener("webglcontextlost", onContextLost);
  canvas.addEventListener("webglcontextrestored", onContextRestored);

  makeSpark();
  setBackground(opts.background || [0, 0, 0]);
  setViews(opts.views);
  if (opts.camera) {
    K = Array.from(opts.camera.K);
    camera.setIntrinsics(K, width, height);
    camera.setViewmat(Array.from(opts.camera.viewmat));
  }
  // without a given up axis, the initial camera's own up (its -y axis in OpenCV terms)
  const givenUp = opts.up && opts.up.length === 3 ? opts.up : null;
  setUp(givenUp || new THREE.Vector3(0, 1, 0).applyQuaternion(camera.quaternion).toArray());
  if (opts.camera) setCamera(opts.camera);
  setMode("orbit");
  camera.setViewport(width, height);
  fitToBox();
  requestRender();

  const nextFrame = () => new Promise((r) => { frameWaiters.push(r); requestRender(); });
  // whether Spark has nothing left to do: no sort under way or due, and the last result drawn
  const quiet = () => !spark || (!spark.sorting && !spark.sortDirty && !spark.dirty);

  return {
    setCamera, getCamera, setData, setStatus, setViews, setBackground, setUp, requestRender,
    setHud(visible) { hud.style.display = visible ? "" : "none"; },
    set center(value) { center = new THREE.Vector3().fromArray(value); retarget(); },
    /** Frames per second over the last half second or more of continuous drawing (0 before any). */
    get fps() { return fps; },
    get numSplats() { return numSplats; },
    /** How many frames were drawn since the viewer was mounted (it draws only when something changed). */
    get framesDrawn() { return framesDrawn; },
    /** The orbit's up axis [3] (world coordinates, unit length). */
    get up() { return sceneUp.toArray(); },
    /** The line shown over the canvas, "" when none (a lost WebGL context). */
    get notice() { return notice.style.display === "none" ? "" : notice.textContent; },
    /** The canvas size in CSS pixels [w, h]. */
    get viewSize() { return viewSize.slice(); },
    /** Resolves after the data has loaded, `n` more frames were drawn, and Spark's sort has come back
     * and been drawn. */
    async settle(n = 30) {
      await loading;
      for (let i = 0; i < n; i++) await nextFrame();
      for (let i = 0; i < 600 && !quiet(); i++) await nextFrame();
    },
    /** The fps counter over a fixed number of frames: the `n` intervals (ms) between the time stamps
     * of n + 1 consecutive frames drawn (drawn back to back for the count) after the data has loaded. */
    async frameIntervals(n = 60) {
      await loading;
      continuous += 1;
      try {
        const stamps = [await nextFrame()];
        for (let i = 0; i < n; i++) stamps.push(await nextFrame());
        return stamps.slice(1).map((t, i) => t - stamps[i]);
      } finally {
        continuous -= 1;
      }
    },
    /** Waits until the GPU has done every command sent so far (a one-pixel read back): drawing is
     * asynchronous, and a software GPU can lag the page by seconds. */
    finish() {
      const gl = renderer.getContext();
      gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, new Uint8Array(4));
    },
    /** The canvas as a PNG data URL, drawn now at the current camera. */
    snapshot() {
      renderer.render(scene, camera);
      return renderer.domElement.toDataURL("image/png");
    },
    destroy() {
      running = false;
      clearTimeout(reportTimer);
      clearTimeout(goneTimer);
      resizeObserver.disconnect();
      window.removeEventListener("keydown", onKeyDown);
      window.removeEventListener("keyup", onKeyUp);
      window.removeEventListener("blur", onBlur);
      orbit.dispose();
      if (mesh) mesh.dispose();
      if (spark) spark.dispose();
      renderer.dispose();
      root.remove();
    },
  };
}

globalThis.gswMountViewer = mount;

// ---- anywidget ------------------------------------------------------------------------------------

function render({ model, el }) {
  const viewer = mount(el, {
    width: model.get("width"),
    height: model.get("height"),
    background: model.get("background"),
    camera: model.get("camera"),
    center: model.get("center"),
    up: model.get("up"),
    views: model.get("views"),
    onCamera(cam) {
      model.set("camera", cam);
      model.save_changes();
    },
  });
  const load = () => viewer.setData(model.get("_data"), model.get("file_type"), model.get("num_splats"));
  load();
  viewer.setStatus(model.get("status"));
  model.on("change:_data", load);
  model.on("change:status", () => viewer.setStatus(model.get("status")));
  model.on("change:views", () => viewer.setViews(model.get("views")));
  model.on("change:center", () => { viewer.center = model.get("center"); });
  model.on("change:up", () => viewer.setUp(model.get("up")));
  model.on("change:background", () => viewer.setBackground(model.get("background")));
  model.on("change:camera", () => {
    const cam = model.get("camera");
    const now = viewer.getCamera();
    if (cam.viewmat.some((v, i) => v !== now.viewmat[i]) || cam.K.some((v, i) => v !== now.K[i])) viewer.setCamera(cam);
  });
  return () => viewer.destroy();
}

export default { render };

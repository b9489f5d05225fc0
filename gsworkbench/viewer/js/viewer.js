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
    this.up.set(0, 1, 0).applyQuaternion(this.quaternion);  // orbiting keeps the camera's own up
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
// aspect ratio, and its height can be dragged (bottom-right corner).
const LAYOUTS = {
  page: () => "position:fixed;left:0;top:0;right:0;bottom:0;overflow:hidden",
  widget: (w, h) => `position:relative;width:100%;aspect-ratio:${w} / ${h};min-height:0;overflow:hidden;resize:vertical`,
};

/**
 * Mounts a viewer in `el`. opts: width, height (CSS px: the image K refers to, and the widget's
 * aspect ratio), layout ("widget", the default, or "page"), background [r,g,b] in [0,1], camera
 * {viewmat: 16 numbers row-major, K: 9 numbers row-major}, center [3] (orbit target), views [{name,
 * viewmat, K}], onCamera(camera) called (throttled) when the user moves the view.
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
  // the workbench's rasterize: eps2d = 0.3 added to the 2D covariance without opacity compensation,
  // 3 standard deviations, alpha below 1/255 skipped, splats sorted by view depth
  const spark = new SparkRenderer({
    renderer, maxStdDev: 3, preBlurAmount: 0.3, blurAmount: 0, minAlpha: 1 / 255, sortRadial: false,
  });
  scene.add(spark);

  const camera = new PinholeCamera();
  scene.add(camera);

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
  }
  const resizeObserver = new ResizeObserver(fitToBox);
  resizeObserver.observe(root);

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

  const orbit = new OrbitControls(camera, renderer.domElement);
  orbit.enableDamping = false;
  let fly = null;  // SparkControls (WASD + drag to look), created on first use
  let mode = "orbit";
  let center = new THREE.Vector3().fromArray(opts.center || [0, 0, 0]);

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
  }
  modeButton.onclick = () => setMode(mode === "orbit" ? "fly" : "orbit");

  let K = null;
  function setCamera(cam) {
    K = Array.from(cam.K);
    camera.setIntrinsics(K, width, height);
    camera.setViewmat(Array.from(cam.viewmat));
    retarget();
    lastSent = cameraKey();
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
    }
    viewSelect.value = "";
  };

  let mesh = null;
  let numSplats = 0;
  let loading = Promise.resolve();
  let generation = 0;  // a newer setData wins even when an older one finishes loading after it
  function setData(bytes, fileType, count) {
    const mine = ++generation;
    // extSplats: float32 centres and finer scales than the default 16-byte packing (float16 centres)
    const next = new SplatMesh({ fileBytes: toBytes(bytes).slice(), fileType, extSplats: true });
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
    });
    return loading;
  }

  let status = "";
  function setStatus(text) {
    status = text || "";
  }

  function setBackground(rgb) {
    renderer.setClearColor(new THREE.Color().setRGB(rgb[0], rgb[1], rgb[2], THREE.SRGBColorSpace), 1);
  }

  let lastSent = "";
  let lastSentTime = 0;
  function cameraKey() {
    camera.updateMatrixWorld(true);
    return camera.matrixWorld.elements.join(",");
  }

  let frames = 0, fpsTime = performance.now(), fps = 0, running = true;
  const frameWaiters = [];  // called with each frame's time stamp (ms), once
  function loop(now) {
    if (!running) return;
    requestAnimationFrame(loop);
    if (mode === "fly" && fly) fly.update(camera);
    renderer.render(scene, camera);
    frames += 1;
    if (now - fpsTime >= 500) {
      fps = (1000 * frames) / (now - fpsTime);
      frames = 0;
      fpsTime = now;
      info.textContent = `${numSplats.toLocaleString()} splats  ${fps.toFixed(1)} fps${status ? "  " + status : ""}`;
    }
    for (const w of frameWaiters.splice(0)) w(now);
    if (opts.onCamera && now - lastSentTime > 200) {
      const key = cameraKey();
      if (key !== lastSent) {
        lastSent = key;
        lastSentTime = now;
        opts.onCamera(getCamera());
      }
    }
  }

  setBackground(opts.background || [0, 0, 0]);
  setViews(opts.views);
  if (opts.camera) setCamera(opts.camera);
  setMode("orbit");
  camera.setViewport(width, height);
  fitToBox();
  requestAnimationFrame(loop);

  const nextFrame = () => new Promise((r) => frameWaiters.push(r));

  return {
    setCamera, getCamera, setData, setStatus, setViews, setBackground,
    setHud(visible) { hud.style.display = visible ? "" : "none"; },
    set center(value) { center = new THREE.Vector3().fromArray(value); retarget(); },
    get fps() { return fps; },
    get numSplats() { return numSplats; },
    /** The canvas size in CSS pixels [w, h]. */
    get viewSize() { return viewSize.slice(); },
    /** Resolves after the data has loaded and `n` more frames were drawn (Spark sorts in a worker). */
    async settle(n = 30) {
      await loading;
      for (let i = 0; i < n; i++) await nextFrame();
    },
    /** The fps counter over a fixed number of frames: the `n` intervals (ms) between the time stamps
     * of n + 1 consecutive frames drawn after the data has loaded. */
    async frameIntervals(n = 60) {
      await loading;
      const stamps = [await nextFrame()];
      for (let i = 0; i < n; i++) stamps.push(await nextFrame());
      return stamps.slice(1).map((t, i) => t - stamps[i]);
    },
    /** The canvas as a PNG data URL, drawn now at the current camera. */
    snapshot() {
      renderer.render(scene, camera);
      return renderer.domElement.toDataURL("image/png");
    },
    destroy() {
      running = false;
      resizeObserver.disconnect();
      orbit.dispose();
      if (mesh) mesh.dispose();
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
  model.on("change:background", () => viewer.setBackground(model.get("background")));
  model.on("change:camera", () => {
    const cam = model.get("camera");
    const now = viewer.getCamera();
    if (cam.viewmat.some((v, i) => v !== now.viewmat[i]) || cam.K.some((v, i) => v !== now.K[i])) viewer.setCamera(cam);
  });
  return () => viewer.destroy();
}

export default { render };

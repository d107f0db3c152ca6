package org.starling;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;

/**
 * Loads the JNI library once, before the first native call (the generated JNI class
 * calls {@link #load()} from its static initializer). Where it looks, in order:
 * <ol>
 *   <li>the file named by the system property {@code starling.jni.library};</li>
 *   <li>{@code libstarling_java.so} on {@code java.library.path} (an installed
 *       Starling: the library sits beside {@code libstarling.so.0});</li>
 *   <li>the copies packed inside starling.jar, extracted to a private temporary
 *       directory, loaded, and deleted again (the mapping stays valid).</li>
 * </ol>
 */
public final class NativeLoader {
  private static final String LIBRARY = "starling_java";
  private static boolean loaded;

  private NativeLoader() {}

  /** Loads the library if needed; throws UnsatisfiedLinkError naming every place tried. */
  public static synchronized void load() {
    if (loaded) return;
    List<String> tried = new ArrayList<>();
    String explicit = System.getProperty("starling.jni.library");
    if (explicit != null) {
      System.load(explicit);
      loaded = true;
      return;
    }
    try {
      System.loadLibrary(LIBRARY);
      loaded = true;
      return;
    } catch (UnsatisfiedLinkError e) {
      tried.add("java.library.path: " + e.getMessage());
    }
    try {
      loadBundled();
      loaded = true;
    } catch (IOException | UnsatisfiedLinkError e) {
      tried.add("copy inside starling.jar: " + e.getMessage());
      throw new UnsatisfiedLinkError("cannot load the Starling JNI library; tried " + String.join("; ", tried)
          + ". Set -Djava.library.path to the directory holding libstarling_java.so"
          + " or -Dstarling.jni.library to its path.");
    }
  }

  private static void loadBundled() throws IOException {
    String platform = System.getProperty("os.name").toLowerCase().replace(' ', '_') + "-"
        + System.getProperty("os.arch");
    String dir = "native/" + platform + "/";
    Path tmp = Files.createTempDirectory("starling-jni");
    List<Path> files = new ArrayList<>();
    try {
      // libstarling.so.0 first: libstarling_java.so finds it through its $ORIGIN RUNPATH.
      for (String name : new String[] {"libstarling.so.0", "lib" + LIBRARY + ".so"}) {
        try (InputStream in = NativeLoader.class.getResourceAsStream(dir + name)) {
          if (in == null) throw new IOException("no " + dir + name + " for this platform");
          Path file = tmp.resolve(name);
          Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
          files.add(file);
        }
      }
      System.load(files.get(files.size() - 1).toString());
    } finally {
      for (Path file : files) Files.deleteIfExists(file);
      Files.deleteIfExists(tmp);
    }
  }
}

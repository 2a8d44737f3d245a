// The Tern sample app: `app` (Jetpack Compose UI, Android services) over `app-logic` (the view
// models, reply suggestion and UI agent, with no Android API in its sources: the repository's
// tests compile and run them on a desktop JVM). Tern itself is built from this repository.
pluginManagement {
    repositories {
        google()
        mavenCentral()
        gradlePluginPortal()
    }
}

dependencyResolutionManagement {
    repositoriesMode.set(RepositoriesMode.FAIL_ON_PROJECT_REPOS)
    repositories {
        google()
        mavenCentral()
    }
}

rootProject.name = "tern-sample"
include(":app-logic", ":app")

// snippet:begin include-tern
// dev.tern:tern-android comes from the library's own build (Rust compiled with cargo-ndk).
includeBuild("../bindings/kotlin")
// snippet:end
